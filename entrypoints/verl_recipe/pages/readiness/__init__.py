"""The readiness page: one self-contained HTML file that draws preflight and rehearsal JSON reports.

Standard library only: the Ansible controller (the preflight report plugin) imports this module as it is, and the
image runs it after `--rehearse`. The page holds its CSS, script and data inline and loads nothing.

What it draws, all from the reports:
- hosts x dies, each die coloured by its worst check. A preflight row is drawn generically from its fields
  (host, check, ok or status, found, expected, fix, and die/dies/peer/peer_die when a row carries them); a row that
  names no die lists its dies in `found` as "die N: ..." entries joined by "; " (the preflight module's format);
- host x host NPU reachability: the pairs a ping row or the recorded ping schedule (each host's `ping_plan`)
  tried, the die pairs lost, and what the plan covered (pings, host pairs, dies pinged);
- every other preflight row of a host as a badge (OS, HDK versions, time, disk, runtime, storage, ...);
- from a rehearsal: per-node all-reduce time and bus bandwidth, the slowest node; per node the expert-parallel
  all-to-all (its slowest pattern's time and bus bandwidth, its slowest peer) and a row per pattern, or a note
  where the report has none; the placement groups;
- a header with the inventory, time, commit and sources, and "SIMULATED cluster" when a report says so.

`verl-recipe report <json>...` regenerates the page from saved reports.

By part: load (the reports read and checked, one line per bad input), model (hosts x dies and host pairs built
from the rows), page (the HTML, with page.css and page.js as package data)."""

from __future__ import annotations

from .load import (
    IPV4,
    MAX_REPORT_BYTES,
    MAX_REPORT_ROWS,
    PAGE_SUFFIX,
    REHEARSAL_NODE_FIELDS,
    REHEARSAL_SUMMARY_FIELDS,
    SEVERITY,
    STATUS_WORDS,
    ReportError,
    Source,
    classify,
    load,
    report_meta,
)
from .model import Model, PageCell, Pair, build, die_entries, is_ping, row_status
from .page import CSS, MARK, SCRIPT, Page, main, page_line, page_path, render, write_page

__all__ = [
    "CSS",
    "PageCell",
    "IPV4",
    "MARK",
    "MAX_REPORT_BYTES",
    "MAX_REPORT_ROWS",
    "Model",
    "PAGE_SUFFIX",
    "Page",
    "Pair",
    "REHEARSAL_NODE_FIELDS",
    "REHEARSAL_SUMMARY_FIELDS",
    "ReportError",
    "SCRIPT",
    "SEVERITY",
    "STATUS_WORDS",
    "Source",
    "build",
    "classify",
    "die_entries",
    "is_ping",
    "load",
    "main",
    "page_line",
    "page_path",
    "render",
    "report_meta",
    "row_status",
    "write_page",
]
