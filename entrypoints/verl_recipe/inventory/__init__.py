"""The inventory deploy.yml reads, checked on the control node before any host is contacted: every problem in one
pass, one line each (SUBJECT: WHAT; fix: FIX). The validate_inventory role's action plugin is the face; the checks
live here, by part: fields (the keys and the shapes of their values), site (group_vars/all and the control node),
hosts (each host's variables and what must differ between hosts)."""

from __future__ import annotations

from .fields import HOST_KEYS, SITE_KEYS, problem
from .hosts import check_hosts, check_vnic, image_stage
from .site import check_site

__all__ = [
    "HOST_KEYS",
    "SITE_KEYS",
    "check_hosts",
    "check_site",
    "check_vnic",
    "image_stage",
    "problem",
]
