"""The one read-only script every host runs for `make inventory`, and the paths it looks at."""

from __future__ import annotations

# Where A3 hosts have npu-smi (docs/a3-tools.md T13): the driver package links it into /usr/local/bin, while
# MindIE's guides, verl's container template and ascend-deployer use /usr/local/sbin. compose.yaml binds one of them.
NPU_SMI_PATHS = ("/usr/local/bin/npu-smi", "/usr/local/sbin/npu-smi")
HCCN_TOOL = "/usr/local/Ascend/driver/tools/hccn_tool"
CONNECT_TIMEOUT_S = 15
# One host's whole answer: SSH, then up to two hccn_tool calls per die (each bounded by `timeout 30` there).
ANSWER_TIMEOUT_S = 300


# The one script every host runs (`ssh HOST sh -s`, the script on standard input): read-only, POSIX sh, one
# key=value a line, parsed by parse_facts()/interpret() here. VERL_INVENTORY_ROOT (unset on a real host) puts the
# files it reads under another root, for the tests. hccn_tool is root-only on A3 hosts: it goes through `sudo -n`
# when the SSH user is not root and may use sudo without a password (as deploy.yml's account may).
#
# The dies: the /dev/davinciN nodes, one per die (davinci0-15 on A3, char 234:N; docs/a3-tools.md T11). They are
# there whenever the driver is loaded, and reading them needs no call to the device manager, which npu-smi
# serialises (Huawei: no concurrent use) and which fails with -8005 while a container holds a die. `npu-smi info
# -l` counts NPU modules ("Total Count", 8 on A3) and their "Chip Count"; whether that count includes the MCU, which
# `-m` lists as chip 2 of every module, was not seen on A3 hardware, so it is not the source. Only names made of
# digits count: `/dev/davinci?` misses davinci10-15 and `davinci*` would take davinci_manager.
FACT_SCRIPT = r"""
R="${VERL_INVENTORY_ROOT:-}"
s='[[:space:]]*'
LC_ALL=C
export LC_ALL
PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
export PATH
echo "format=1"
echo "hostname=$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname 2>/dev/null)"
echo "ssh_connection=${SSH_CONNECTION:-}"
if command -v ip >/dev/null 2>&1; then
  ip -o -4 addr show 2>/dev/null | while read -r _ nic _ addr _; do echo "inet=$nic $addr"; done
else
  echo "ip_tool=missing"
fi
dies=""
for d in "$R"/dev/davinci*; do
  n="${d##*/davinci}"
  case "$n" in ''|*[!0-9]*) continue ;; esac
  [ -e "$d" ] || continue
  echo "davinci=$n"
  dies="$dies $n"
done
for p in /usr/local/bin/npu-smi /usr/local/sbin/npu-smi; do
  if [ -d "$R$p" ]; then
    echo "npu_smi_dir=$p"
  elif [ -f "$R$p" ] && [ -x "$R$p" ]; then
    echo "npu_smi=$p"
  fi
done
o="$(command -v npu-smi 2>/dev/null)"
[ -n "$o" ] && echo "npu_smi_path=$o"
SUDO=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  SUDO="sudo -n"
fi
echo "user=$(id -un 2>/dev/null)${SUDO:+ with sudo -n}"
conf="$R/etc/hccn.conf"
state=absent
if [ -f "$conf" ]; then
  if [ -r "$conf" ]; then
    rd="cat"
  elif [ -n "$SUDO" ]; then
    rd="$SUDO cat"
  else
    rd=""
  fi
  if [ -n "$rd" ]; then
    state=present
    $rd "$conf" | sed -n "s/^${s}address_\([0-9][0-9]*\)$s=$s\([^[:space:]]*\).*/conf_address=\1 \2/p"
  else
    state=unreadable
  fi
fi
echo "hccn_conf=$state"
tool=""
if [ -x "$R/usr/local/Ascend/driver/tools/hccn_tool" ]; then
  tool="$R/usr/local/Ascend/driver/tools/hccn_tool"
else
  tool="$(command -v hccn_tool 2>/dev/null)"
fi
echo "hccn_tool=$tool"
lim=""
command -v timeout >/dev/null 2>&1 && lim="timeout 30"
if [ -n "$tool" ]; then
  for n in $dies; do
    if [ "$state" != present ]; then
      out="$($lim $SUDO "$tool" -i "$n" -ip -g 2>&1)"
      rc=$?
      printf '%s\n' "$out" | while IFS= read -r l; do [ -n "$l" ] && echo "tool_ip=$n $l"; done
      echo "tool_ip_rc=$n $rc"
    fi
    out="$($lim $SUDO "$tool" -i "$n" -vnic -g 2>&1)"
    rc=$?
    printf '%s\n' "$out" | while IFS= read -r l; do [ -n "$l" ] && echo "tool_vnic=$n $l"; done
    echo "tool_vnic_rc=$n $rc"
  done
fi
for part in driver firmware; do
  f="$R/usr/local/Ascend/$part/version.info"
  if [ -r "$f" ]; then
    sed -n "s/^${s}Version$s=$s\([^[:space:]]*\).*/${part}_version=\1/p
s/^${s}package_version$s=$s\([^[:space:]]*\).*/${part}_package=\1/p" "$f"
  else
    echo "${part}_info=absent"
  fi
done
sed -n 's/^MemTotal:[[:space:]]*\([0-9][0-9]*\).*/mem_total_kib=\1/p' "$R/proc/meminfo" 2>/dev/null
echo "end=1"
"""
