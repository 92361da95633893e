# Sourced by profiles/nsys/profile-train.sh and slurm/qsgd-array.sbatch: the
# one place that finds nsys, composes `nsys profile` options, picks the MPI
# implementation for --trace=mpi, and turns reports into the NVTX summary.
# Functions only; they print their errors to stderr and return non-zero
# (the caller decides whether that ends it).
#
#   nsys_find                    sets nsys (from $NSYS or PATH) or prints how
#                                to install it and returns 3
#   nsys_mpi_of_program EXE      openmpi or mpich, from the MPI library EXE
#                                links (ldd), or nothing
#   nsys_profile_opts TRACE SAMPLING MPI_IMPL CAPTURE EXTRA
#                                fills the array nsys_opts with
#                                `profile --trace=... ...`; CAPTURE=1 records
#                                only inside the NVTX range train/capture
#                                (qsgd-train --profile-steps A:B) and exports
#                                NSYS_NVTX_PROFILER_REGISTER_ONLY=0
#   nsys_summarize DIR NAME REF META EXPECT KEEP_QDSTRM HEADER
#                                DIR/NAME*.qdstrm -> .nsys-rep -> NVTX CSVs ->
#                                DIR/summary.txt and summary.json (META: a JSON
#                                object of provenance; EXPECT: the report
#                                count expected, 0 = any; HEADER: the lines
#                                that open summary.txt)
#   nsys_clear DIR NAME          removes an earlier run's reports and summary

nsys_common_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

nsys_find() {
  nsys="${NSYS:-$(command -v nsys || true)}"
  if [ -n "$nsys" ] && [ -x "$nsys" ]; then return 0; fi
  cat >&2 <<'EOF'
error: nsys (NVIDIA Nsight Systems) was not found.
  Debian 12: scripts/install-deps.sh --nsys   (adds Debian's non-free component and
             installs the package `nsight-systems`, 2022.4)
  or by hand: scripts/debian-sources.sh --non-free && apt-get install nsight-systems
  Elsewhere: install Nsight Systems from NVIDIA (or `module load nsight-systems`,
  e.g. in the site environment file) and put nsys on PATH, or set NSYS=/path/to/nsys.
EOF
  return 3
}

# The MPI implementation nsys is to trace: the library the program links,
# which is what runs whatever the launcher (srun prints only Slurm's version).
nsys_mpi_of_program() {
  local exe libs
  exe="$(command -v "$1" 2>/dev/null)" || return 0
  libs="$(ldd "$exe" 2>/dev/null)" || return 0
  case "$libs" in
    *libmpi.so.40*) echo openmpi ;;
    *libmpich*|*libmpi.so.12*) echo mpich ;;
  esac
}

nsys_profile_opts() {  # TRACE SAMPLING MPI_IMPL CAPTURE EXTRA
  local extra
  nsys_opts=(profile "--trace=$1" --force-overwrite=true)
  # Sampling needs perf events (often not allowed in containers) and triples
  # the time of a short job on a small machine: off unless asked for.
  [ "$2" = 1 ] || nsys_opts+=(--sample=none --cpuctxsw=none)
  [ -z "$3" ] || nsys_opts+=("--mpi-impl=$3")
  if [ "$4" = 1 ]; then
    nsys_opts+=(--capture-range=nvtx --nvtx-capture=train/capture --capture-range-end=stop)
    # train/capture is not a registered string: nsys must match it anyway.
    export NSYS_NVTX_PROFILER_REGISTER_ONLY=0
  fi
  if [ -n "$5" ]; then read -r -a extra <<<"$5"; nsys_opts+=("${extra[@]}"); fi
}

# Debian's Nsight Systems 2022.4 leaves a .qdstrm: nsys looks for its importer
# beside itself, Debian installs it elsewhere (not on PATH). The importer turns
# it into the .nsys-rep that `nsys stats` reads.
nsys_find_importer() {
  local c real
  real="$(readlink -f "$nsys")"
  # NVIDIA's layout: host-linux-x64/ beside target-linux-x64/ (or bin/);
  # Debian's: /usr/lib/nsight-systems/host-linux-x64, nsys elsewhere.
  for c in "${NSYS_QDSTRM_IMPORTER:-}" \
           "$(dirname "$real")/../host-linux-x64/QdstrmImporter" \
           /usr/lib/nsight-systems/host-linux-x64/QdstrmImporter; do
    if [ -n "$c" ] && [ -x "$c" ]; then readlink -f "$c"; return 0; fi
  done
  return 1
}

nsys_clear() {  # DIR NAME
  rm -f "$1/$2".qdstrm "$1/$2".nsys-rep "$1/$2".sqlite "$1/$2"_nvtxsum.csv "$1/$2"_nvtx_sum.csv \
        "$1/$2".*.qdstrm "$1/$2".*.nsys-rep "$1/$2".*.sqlite "$1/$2".*_nvtxsum.csv "$1/$2".*_nvtx_sum.csv \
        "$1/summary.txt" "$1/summary.json"
}

nsys_summarize() {  # DIR NAME REF META EXPECT KEEP_QDSTRM HEADER
  local dir="$1" name="$2" ref="$3" meta="$4" expect="$5" keep="$6" header="$7"
  local q rep importer base nvtx_report python reports=() csvs=()
  python="${PYTHON:-/usr/bin/python3}"
  [ -x "$python" ] || python="$(command -v python3 || true)"
  [ -n "$python" ] || { echo "error: python3 is needed for the NVTX summary" >&2; return 1; }
  local had_nullglob=0
  shopt -q nullglob && had_nullglob=1
  shopt -s nullglob
  for q in "$dir/$name".qdstrm "$dir/$name".*.qdstrm; do
    [ -e "$q" ] || continue  # NAME.qdstrm is not a pattern: nullglob keeps it
    rep="${q%.qdstrm}.nsys-rep"
    if [ ! -e "$rep" ]; then
      importer="$(nsys_find_importer)" || {
        echo "error: $q needs QdstrmImporter (host-linux-x64/ of the Nsight Systems install); set NSYS_QDSTRM_IMPORTER=/path/to/it" >&2
        return 1; }
      "$importer" -i "$q" >"$q.import.log" 2>&1 || {
        tail -n 5 "$q.import.log" >&2; echo "error: QdstrmImporter failed on $q" >&2; return 1; }
      rm -f "$q.import.log"
      [ -e "$rep" ] || { echo "error: QdstrmImporter did not write $rep" >&2; return 1; }
    fi
    [ "$keep" = 1 ] || rm -f "$q"
  done
  for rep in "$dir/$name".nsys-rep "$dir/$name".*.nsys-rep; do [ ! -e "$rep" ] || reports+=("$rep"); done
  [ "$had_nullglob" = 1 ] || shopt -u nullglob
  [ "${#reports[@]}" -gt 0 ] || { echo "error: nsys wrote no report $dir/$name*.nsys-rep" >&2; return 1; }
  if [ "$expect" != 0 ] && [ "${#reports[@]}" -ne "$expect" ]; then
    echo "warning: ${#reports[@]} reports in $dir for $expect profiled ranks" >&2
  fi
  # The NVTX range summary is report "nvtxsum" up to nsys 2022 and "nvtx_sum"
  # in later versions (which refuse the old name): ask this nsys which it has.
  # (`nsys stats --help-reports` exits with status 1 after its list.)
  nvtx_report="$({ "$nsys" stats --help-reports 2>/dev/null || true; } |
    awk '$1 == "nvtx_sum" || $1 == "nvtxsum" { print $1; exit }')"
  if [ -z "$nvtx_report" ]; then
    echo "error: $("$nsys" --version 2>&1 | head -n 1) lists neither the nvtx_sum nor the nvtxsum report (nsys stats --help-reports)" >&2
    return 1
  fi
  for rep in "${reports[@]}"; do
    base="${rep%.nsys-rep}"
    "$nsys" stats --report "$nvtx_report" --format csv --force-export=true --force-overwrite=true -o "$base" "$rep" \
      >"$base.stats.log" 2>&1 || { tail -n 5 "$base.stats.log" >&2; echo "error: nsys stats failed on $rep" >&2; return 1; }
    if [ ! -s "${base}_${nvtx_report}.csv" ]; then
      echo "error: no NVTX ranges in $rep: was the program built with NVTX3 headers? (CMake prints 'NVTX ranges: on'; see docs/profiling.md)" >&2
      return 1
    fi
    rm -f "$base.stats.log"
    csvs+=("${base}_${nvtx_report}.csv")
  done
  {
    printf '%s\n' "$header"
    "$python" "$nsys_common_dir/nvtx_summary.py" summary --ref "$ref" --json "$dir/summary.json" --meta "$meta" "${csvs[@]}"
  } | tee "$dir/summary.txt"
  return "${PIPESTATUS[0]}"
}

# A JSON string literal.
nsys_json_str() {
  local python="${PYTHON:-/usr/bin/python3}"
  [ -x "$python" ] || python="$(command -v python3)"
  "$python" -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"
}
