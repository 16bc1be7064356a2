"""The HTML pages: the shared kit (kit), the run page of a run folder (run_page), and the readiness page of the
preflight and rehearsal reports (readiness). Standard library only: the readiness page is drawn on the control
node by the preflight's report plugin."""
