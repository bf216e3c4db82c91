#!/bin/bash
# A/B: base (format 10, da6e4fe) vs new (format 11) at 100,000 tracks x 100 rows and 16 tracks.
# The side-by-side figures of docs/bench-format-11.md: BASE=<format-10 build> [NEW=...] [DATA=<dir of the
# cardinality benchmark's files>] [WORK=<scratch dir>] scripts/ab_format11.sh. Builds alternate, two rounds.
set -u
NEW=${NEW:-target/release/series-archive}
BASE=${BASE:?set BASE to a format-10 build, e.g. one of da6e4fe}
F100K=${DATA:-/tmp/card2}/100000-tracks-10000000/metrics.parquet
F16=${DATA:-/tmp/card2}/16-tracks-10000000/metrics.parquet
W=${WORK:-/tmp/ab}; rm -rf $W; mkdir -p $W
t() { /usr/bin/time -f "%e %U %S %M" "$@" 2>&1 >/dev/null | tail -1; }
ING="--stream metrics --track host,metric --axis ts --ladder 1000000000,8,8 --seal-rows 100000 --no-compact"
for round in 1 2; do
  for v in base new; do
    B=$BASE; [ $v = new ] && B=$NEW
    for n in 100k 16; do
      F=$F100K; [ $n = 16 ] && F=$F16
      A=$W/$v-$n-$round; rm -rf $A
      echo "ingest $n $v r$round: $(t $B ingest $A $F $ING) manifest=$(du -sb $A/manifest | cut -f1)"
    done
  done
done
for v in base new; do
  B=$BASE; [ $v = new ] && B=$NEW
  for r in 1 2; do echo "inspect 100k $v: $(t $B inspect $W/$v-100k-1 --json)"; done
  for r in 1 2 3 4 5; do echo "survey1 100k $v: $(t $B survey $W/$v-100k-1 --stream metrics --track h0500 m50 --budget 400 --json)"; done
  for r in 1 2 3; do echo "rows1 100k $v: $(t $B rows $W/$v-100k-1 --stream metrics --track h0500 m50)"; done
  echo "wholesurvey 100k $v: $(t $B survey $W/$v-100k-1 --stream metrics --budget 4000 --json)"
done
for v in base new; do
  B=$BASE; [ $v = new ] && B=$NEW
  echo "compact 100k $v: $(t $B compact $W/$v-100k-2) manifest=$(du -sb $W/$v-100k-2/manifest | cut -f1)"
  for r in 1 2 3 4 5; do echo "survey1-compacted 100k $v: $(t $B survey $W/$v-100k-2 --stream metrics --track h0500 m50 --budget 400 --json)"; done
  echo "inspect-compacted 100k $v: $(t $B inspect $W/$v-100k-2 --json)"
done
# answers equal
$BASE survey $W/base-100k-1 --stream metrics --track h0500 m50 --budget 400 --json > $W/s-base.json
$NEW survey $W/new-100k-1 --stream metrics --track h0500 m50 --budget 400 --json > $W/s-new.json
cmp $W/s-base.json $W/s-new.json && echo "one-track survey answers equal"
$BASE rows $W/base-100k-2 --stream metrics --track h0500 > $W/r-base.txt
$NEW rows $W/new-100k-2 --stream metrics --track h0500 > $W/r-new.txt
cmp $W/r-base.txt $W/r-new.txt && echo "prefix rows after compact equal ($(wc -l < $W/r-new.txt) lines)"
$NEW inspect $W/new-100k-1 --json | python3 -c "import json,sys; d=json.load(sys.stdin); s=d['streams'][0]; print('new inspect rows', s['rows'], 'tracks', len(s['tracks']))"
$BASE inspect $W/base-100k-1 --json | python3 -c "import json,sys; d=json.load(sys.stdin); s=d['streams'][0]; print('base inspect rows', s['rows'], 'tracks', len(s['tracks']))"
for r in 1 2; do
.venv/bin/python - "$F100K" "$W" <<'PY'
import duckdb, sys, time
t=time.perf_counter()
c=duckdb.connect()
c.execute(f"COPY (SELECT * FROM '{sys.argv[1]}') TO '{sys.argv[2]}/copy.parquet' (FORMAT parquet, COMPRESSION zstd)")
print("duckdb COPY 100k: %.2f s" % (time.perf_counter()-t))
PY
done
