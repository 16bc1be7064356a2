"""`make inventory`: the facts a site's hosts report about themselves (scripts/site_inventory.py is the face),
checked, and written as the site's hosts.yml. By part: script (what runs on each host), request, probe (SSH),
facts (one host's answer), crosscheck (between hosts), render (the YAML)."""
