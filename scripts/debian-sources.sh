#!/usr/bin/env bash
# Makes Debian's `non-free` (+ `non-free-firmware`, `contrib`) components and/or
# `deb-src` entries for bookworm, bookworm-updates and bookworm-security
# available to apt.
#
#   scripts/debian-sources.sh --non-free            binary contrib, non-free,
#                                                 non-free-firmware (NVIDIA's
#                                                 non-free packages need contrib)
#   scripts/debian-sources.sh --deb-src             source entries (same components as
#                                                 the binary ones)
#   scripts/debian-sources.sh --non-free --deb-src  both (also the default without options)
#
# System files are never edited: what is missing goes into a file of our own,
# /etc/apt/sources.list.d/qsgd-debian-extra.sources (deb822), written with the
# same URIs and Signed-By as the Debian entries already configured (apt refuses
# two entries for one repository with different Signed-By). What any other
# source file already provides is left out, so nothing is duplicated.
# Idempotent: a second run leaves the file alone and does not call apt-get
# update. `apt-get update` runs only when the file changed (or its lists were
# never fetched); errors from third-party sources are tolerated as long as
# Debian's lists for the new entries arrived.
set -euo pipefail

want_nonfree=0
want_debsrc=0
for arg in "$@"; do
  case "$arg" in
    --non-free) want_nonfree=1 ;;
    --deb-src) want_debsrc=1 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "debian-sources: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$want_nonfree" = 0 ] && [ "$want_debsrc" = 0 ]; then
  want_nonfree=1
  want_debsrc=1
fi

codename=bookworm
suites=("$codename" "$codename-updates" "$codename-security")
comp_order=(main contrib non-free non-free-firmware)

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

log() { echo "debian-sources: $*"; }
die() { echo "debian-sources: error: $*" >&2; exit 1; }

if [ -r /etc/os-release ]; then
  # shellcheck disable=SC1091
  os_codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
  if [ -n "$os_codename" ] && [ "$os_codename" != "$codename" ]; then
    echo "debian-sources: warning: this system is '$os_codename', the entries are for '$codename'" >&2
  fi
fi

# apt parses sources.list and sources.list.d (one-line and deb822 formats) for
# us: `apt-get indextargets` lists every index target, here as
# type|repo|suite|component|entry, where entry is "file:N" (N = line for .list,
# stanza for .sources). apt merges identical targets from several files, so
# our file and all the others are looked at separately, each through a
# temporary sources.list.d of symbolic links. --no-release-info: list also
# targets that the fetched Release files say do not exist (bookworm-updates
# has no non-free for amd64, for example).
parts_dir="$(apt-config shell d Dir::Etc::sourceparts/d | sed -n "s/^d='\(.*\)'$/\1/p")"
parts_dir="${parts_dir%/}"
[ -d "$parts_dir" ] || die "cannot find apt's sources.list.d"
ours="$parts_dir/qsgd-debian-extra.sources"
view_dir="$(mktemp -d)"
trap 'rm -rf "$view_dir"' EXIT
mkdir "$view_dir/ours" "$view_dir/others"
for f in "$parts_dir"/*; do
  [ -e "$f" ] || continue
  if [ "$f" = "$ours" ]; then
    ln -s "$f" "$view_dir/ours/"
  else
    ln -s "$f" "$view_dir/others/"
  fi
done
targets() {  # ours | others
  local list=()
  if [ "$1" = ours ]; then list=(-o Dir::Etc::sourcelist=/dev/null); fi
  # shellcheck disable=SC2016  # $(FIELD) is apt's format syntax
  apt-get indextargets --no-release-info "${list[@]}" -o "Dir::Etc::sourceparts=$view_dir/$1" \
    --format '$(TARGET_OF)|$(REPO_URI)|$(RELEASE)|$(COMPONENT)|$(SOURCESENTRY)' \
    | awk -F'|' -v OFS='|' 'NF == 5 { sub(/\/$/, "", $2); print }' | sort -u
}
others_targets="$(targets others)" || die "apt-get indextargets failed (broken apt sources?)"
ours_targets="$(targets ours)" || die "apt-get indextargets failed on $ours"

# Signed-By of a source entry "file:N", printed as the deb822 field value
# (possibly multi-line); empty when the entry has none.
signed_by_of() {
  local entry="$1" file n
  file="${entry%:*}"
  n="${entry##*:}"
  case "$file" in
    *.sources)
      awk -v want="$n" '
        /^#/ { next }
        /^[ \t]*$/ { if (has) { stanza++; has = 0 }; next }
        { if (!has) { has = 1; cur = stanza + 1 } }
        cur == want && tolower($0) ~ /^signed-by:/ { insb = 1; v = $0; sub(/^[^:]*:[ \t]*/, "", v); print v; next }
        cur == want && insb && /^[ \t]/ { print; next }
        { insb = 0 }
      ' "$file"
      ;;
    *)
      sed -n "${n}p" "$file" | sed -n 's/.*\[[^]]*signed-by=\([^] ]*\).*/\1/p'
      ;;
  esac
}

declare -A repo_of=() signed_of=() others=() want=()
while IFS='|' read -r type repo suite comp entry; do
  [ -n "$type" ] || continue
  want["$type|$repo|$suite|$comp"]=1   # keep what earlier runs added
done <<< "$ours_targets"
while IFS='|' read -r type repo suite comp entry; do
  [ -n "$type" ] || continue
  others["$type|$repo|$suite|$comp"]=1
  if [ "$type" = deb ] && [ -z "${repo_of[$suite]:-}" ]; then
    repo_of["$suite"]="$repo"
    signed_of["$suite"]="$(signed_by_of "$entry")"
  fi
done <<< "$others_targets"

[ -n "${repo_of[$codename]:-}" ] || die "no 'deb' entry for Debian '$codename' is configured in apt's sources"
for s in "${suites[@]}"; do
  if [ -z "${repo_of[$s]:-}" ]; then
    log "note: no 'deb' entry for '$s' is configured; leaving that suite alone"
  fi
done

if [ "$want_nonfree" = 1 ]; then
  for s in "${suites[@]}"; do
    [ -n "${repo_of[$s]:-}" ] || continue
    # contrib too: non-free's NVIDIA packages depend on contrib ones
    # (libcuda1, needed by nvidia-cuda-toolkit, depends on nvidia-support).
    want["deb|${repo_of[$s]}|$s|contrib"]=1
    want["deb|${repo_of[$s]}|$s|non-free"]=1
    want["deb|${repo_of[$s]}|$s|non-free-firmware"]=1
  done
fi
if [ "$want_debsrc" = 1 ]; then
  # Source entries mirror the binary components (ours and the system's).
  for s in "${suites[@]}"; do
    [ -n "${repo_of[$s]:-}" ] || continue
    for k in "${!others[@]}" "${!want[@]}"; do
      IFS='|' read -r type repo suite comp <<< "$k"
      if [ "$type" = deb ] && [ "$repo" = "${repo_of[$s]}" ] && [ "$suite" = "$s" ]; then
        want["deb-src|$repo|$s|$comp"]=1
      fi
    done
  done
fi

# Drop what other files already provide; group the rest into deb822 stanzas:
# one stanza per (repo, components, types), listing its suites.
declare -A comps_of=()   # type|repo|suite -> " comp comp"
for k in "${!want[@]}"; do
  [ -z "${others[$k]:-}" ] || continue
  IFS='|' read -r type repo suite comp <<< "$k"
  comps_of["$type|$repo|$suite"]+=" $comp"
done
sort_comps() {
  local c out=""
  for c in "${comp_order[@]}"; do
    case " $1 " in *" $c "*) out+=" $c" ;; esac
  done
  for c in $1; do
    case " ${comp_order[*]} " in *" $c "*) ;; *) out+=" $c" ;; esac
  done
  echo "${out# }"
}
declare -A types_of=()   # repo|suite|comps -> "deb deb-src"
declare -a order=()
for s in "${suites[@]}"; do
  for type in deb deb-src; do
    for k in "${!comps_of[@]}"; do
      IFS='|' read -r t repo suite <<< "$k"
      if [ "$t" != "$type" ] || [ "$suite" != "$s" ]; then continue; fi
      key="$repo|$suite|$(sort_comps "${comps_of[$k]}")"
      [ -n "${types_of[$key]:-}" ] || order+=("$key")
      types_of["$key"]="${types_of[$key]:+${types_of[$key]} }$type"
    done
  done
done
declare -A suites_of=()
declare -a stanzas=()
for key in "${order[@]}"; do
  IFS='|' read -r repo suite comps <<< "$key"
  skey="${types_of[$key]}|$repo|$comps"
  [ -n "${suites_of[$skey]:-}" ] || stanzas+=("$skey")
  suites_of["$skey"]="${suites_of[$skey]:+${suites_of[$skey]} }$suite"
done

content=""
if [ "${#stanzas[@]}" -gt 0 ]; then
  content="# Written by qsgd's scripts/debian-sources.sh; safe to delete.
# Adds to Debian's own entries only what they lack (contrib/non-free and/or deb-src)."
  for skey in "${stanzas[@]}"; do
    IFS='|' read -r types repo comps <<< "$skey"
    first="${suites_of[$skey]%% *}"
    content+="

Types: $types
URIs: $repo
Suites: ${suites_of[$skey]}
Components: $comps"
    sb="${signed_of[$first]:-}"
    if [ -n "$sb" ]; then
      content+="
Signed-By: $sb"
    fi
  done
  content+=$'\n'
fi

changed=0
if [ -z "$content" ]; then
  if [ -e "$ours" ]; then
    log "everything requested is already configured elsewhere; removing $ours"
    $SUDO rm -f "$ours"
    changed=1
  else
    log "everything requested is already configured; nothing to do"
  fi
elif [ -e "$ours" ] && [ "$(cat "$ours")"$'\n' = "$content" ]; then
  log "$ours is up to date"
else
  tmp="$(mktemp)"
  printf '%s' "$content" > "$tmp"
  $SUDO install -m 0644 "$tmp" "$ours"
  rm -f "$tmp"
  log "wrote $ours:"
  sed 's/^/    /' "$ours"
  changed=1
fi

# Lists of our entries for the base suite that are missing on disk: a changed
# file, or an earlier update that failed, both call for `apt-get update`.
# (--no-release-info, since apt leaves out targets whose list is missing;
# binary-all lists are skipped: Debian has none, all is in binary-<arch>.)
missing_lists() {
  # shellcheck disable=SC2016
  apt-get indextargets --no-release-info --format '$(RELEASE)|$(ARCHITECTURE)|$(SOURCESENTRY)|$(FILENAME)' \
    | while IFS='|' read -r suite arch entry fn; do
        if [ "${entry%:*}" != "$ours" ] || [ "$suite" != "$codename" ] || [ "$arch" = all ]; then
          continue
        fi
        compgen -G "$fn*" > /dev/null || echo "$fn"
      done | sort -u
}
if [ -e "$ours" ] && [ -n "$(missing_lists)" ]; then
  changed=1
fi

if [ "$changed" = 1 ]; then
  log "running apt-get update"
  # Third-party sources may be unreachable; only Debian's lists matter here.
  $SUDO apt-get update -o Acquire::Retries=3 \
    || echo "debian-sources: apt-get update reported errors; checking Debian's lists" >&2
  if [ -e "$ours" ]; then
    still="$(missing_lists)"
    if [ -n "$still" ]; then
      echo "debian-sources: error: apt-get update did not fetch:" >&2
      while IFS= read -r l; do echo "    $l"; done <<< "$still" >&2
      exit 1
    fi
  fi
fi
log "done"
