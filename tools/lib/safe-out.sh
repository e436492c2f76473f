# SPDX-License-Identifier: GPL-2.0-only
# shellcheck shell=bash
# Output directories of the tools that run as root (tools/soak, tools/fresh-root), sourced.
#
# safe_out_dir DIR: make DIR if needed (mode 0755, each level after its parent passed) and
# refuse it, in one line on stderr and
# exit 1, unless DIR and every directory above it is a real directory (no symlink) owned by
# root or the user running this, and none of them is writable by group or others (a
# directory above DIR may be, with the sticky bit: /tmp). Then nobody else can plant or
# swap a name on the way, and a file written there by path is written where it was meant.
# safe_put DIR NAME: stdin into DIR/NAME through a fresh file (mktemp in DIR) renamed over
# NAME (mv -T: a symlink there is replaced, not followed).
# safe_tmp DIR NAME / safe_commit DIR TMP NAME: the same in two steps, for a command's output
# written as it goes (redirect it to the temporary file, then commit it).

safe_out_die() { echo "${SAFE_OUT_WHO:-tools}: $*" >&2; exit 1; }

safe_out_dir() {
  local dir=$1 p="" part uid mode type
  [ -n "$dir" ] || safe_out_die "empty output directory"
  [[ $dir == /* ]] || dir=$PWD/$dir
  local -a parts
  IFS=/ read -r -a parts <<< "${dir#/}"
  for part in "" "${parts[@]}"; do
    [ -n "$part" ] || [ -z "$p" ] || continue
    p=${p%/}/$part
    # made one level at a time, each after its parent passed
    if [ ! -e "$p" ] && [ ! -L "$p" ]; then
      mkdir -m 0755 -- "$p" || safe_out_die "cannot make the output directory $dir ($p)"
    fi
    # stat without -L: the name itself, a symlink included
    read -r uid mode type < <(stat -c '%u %a %F' -- "$p" 2>/dev/null) ||
      safe_out_die "output directory $dir: cannot stat $p"
    [ "$type" = directory ] ||
      safe_out_die "output directory $dir: $p is a $type, not a directory: refusing to write there"
    [ "$uid" = 0 ] || [ "$uid" = "$(id -u)" ] ||
      safe_out_die "output directory $dir: $p is owned by uid $uid, neither root nor you: refusing to write there"
    # group/other write: above DIR only with the sticky bit
    if (( 8#$mode & 8#022 )) && ! (( 8#$mode & 8#1000 )); then
      safe_out_die "output directory $dir: $p is writable by others (mode $mode): refusing to write there"
    fi
  done
  # and DIR itself not at all ($mode: the last one stat'ed)
  if (( 8#$mode & 8#022 )); then
    safe_out_die "output directory $dir is writable by others (mode $mode): refusing to write there"
  fi
}

safe_tmp() { mktemp -- "$1/.$2.XXXXXX" || safe_out_die "cannot make a file in $1"; }

safe_commit() {
  chmod 0644 -- "$2" && mv -T -- "$2" "$1/$3" || safe_out_die "cannot write $1/$3"
}

safe_put() {
  local t
  t=$(safe_tmp "$1" "$2")
  cat > "$t" || { rm -f -- "$t"; safe_out_die "cannot write $1/$2"; }
  safe_commit "$1" "$t" "$2"
}
