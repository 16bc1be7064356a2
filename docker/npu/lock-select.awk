# Split a hashed requirements lock by package name: `awk -v want=1 -f lock-select.awk NAMES LOCK` prints the entries
# (requirement line + hash lines) of the packages named in NAMES (one per line, # comments allowed); want=0 prints
# all the others. Comment lines of LOCK are dropped. Used by docker/npu/Dockerfile on docker/lock/npu.lock.
FNR == NR { if ($1 !~ /^#/ && NF) names[tolower($1)] = 1; next }
/^[A-Za-z0-9]/ { split($1, parts, "=="); keep = ((tolower(parts[1]) in names) == want) }
keep && !/^ *#/
