#!/bin/bash
# Two builds side by side on the cardinality benchmark's 10M-row files (100,000 tracks x 100 rows, and 16
# tracks): ingest without and with its compactions, inspect, compact, a one-track survey, and
# the answers compared. OLD=<build> [NEW=<build>] [DATA=<dir of the files, made by
# scripts/bench_cardinality.py>] [WORK=<scratch dir>] scripts/ab_fleet.sh. Builds alternate.
set -u
NEW=${NEW:-target/release/series-archive}; OLD=${OLD:?set OLD to the build to compare against, e.g. one of b8b993e}
D=${DATA:-/tmp/card2}; W=${WORK:-/tmp}
F100K=$D/100000-tracks-10000000/metrics.parquet; F16=$D/16-tracks-10000000/metrics.parquet
ING="--stream metrics --track host,metric --axis ts --ladder 1000000000,8,8 --seal-rows 100000"
t() { /usr/bin/time -f "%e s, user %U, %M KB" "$@" 2>&1 >/dev/null | tail -1; }
for r in 1 2; do for v in old new; do B=$OLD; [ $v = new ] && B=$NEW; rm -rf $W/ab-$v; echo "ingest-nocompact 100k $v: $(t $B ingest $W/ab-$v $F100K $ING --no-compact)"; done; done
for v in old new; do B=$OLD; [ $v = new ] && B=$NEW; rm -rf $W/ab16-$v; echo "ingest-nocompact 16 $v: $(t $B ingest $W/ab16-$v $F16 $ING --no-compact)"; done
for r in 1 2; do for v in old new; do B=$OLD; [ $v = new ] && B=$NEW; echo "inspect 100k $v: $(t $B inspect $W/ab-$v --json)"; done; done
for r in 1 2; do for v in old new; do B=$OLD; [ $v = new ] && B=$NEW; rm -rf $W/abc-$v; cp -r $W/ab-$v $W/abc-$v; echo "compact 100k $v: $(t $B compact $W/abc-$v)"; done; done
for v in old new; do B=$OLD; [ $v = new ] && B=$NEW; rm -rf $W/abc16-$v; cp -r $W/ab16-$v $W/abc16-$v; echo "compact 16 $v: $(t $B compact $W/abc16-$v)"; done
for v in old new; do B=$OLD; [ $v = new ] && B=$NEW; rm -rf $W/abd-$v; echo "ingest-default 100k $v: $(t $B ingest $W/abd-$v $F100K $ING)"; done
for v in old new; do B=$OLD; [ $v = new ] && B=$NEW; echo "survey1 100k uncompacted $v: $(t $B survey $W/ab-$v --stream metrics --track h0500 m50 --budget 400 --json)"; done
$OLD inspect $W/ab-old --json | sed "s#$W/ab-old#X#g" > $W/i-old.json; $NEW inspect $W/ab-new --json | sed "s#$W/ab-new#X#g" > $W/i-new.json; cmp $W/i-old.json $W/i-new.json && echo "inspect answers equal"
$OLD rows $W/abc-old --stream metrics --track h0500 > $W/r-old.txt; $NEW rows $W/abc-new --stream metrics --track h0500 > $W/r-new.txt; cmp $W/r-old.txt $W/r-new.txt && echo "rows after compact equal ($(wc -l < $W/r-new.txt) lines)"
$OLD rows $W/abd-old --stream metrics --track h0999 > $W/d-old.txt; $NEW rows $W/abd-new --stream metrics --track h0999 > $W/d-new.txt; cmp $W/d-old.txt $W/d-new.txt && echo "rows after default ingest equal ($(wc -l < $W/d-new.txt) lines)"
$OLD survey $W/ab-old --stream metrics --track h0500 m50 --budget 400 --json > $W/s-old.json; $NEW survey $W/ab-new --stream metrics --track h0500 m50 --budget 400 --json > $W/s-new.json; cmp $W/s-old.json $W/s-new.json && echo "survey equal"
