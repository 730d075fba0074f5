#!/bin/sh
# rma_order over two processes: big RMA followed at once by small writes, reads and a message
# keeps RAW, WAR, WAW and SAW; a big write completes while its initiator sleeps, and a region
# closed under one is never written after fi_close returns; see rma_order.c.
d=$(dirname "$0")
"$d/run_pair.sh" rma_order -x order || exit 1
exec "$d/run_pair.sh" rma_order -x lease
