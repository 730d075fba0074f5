#!/bin/sh
# rma_errors over two processes, in both key modes: bad key, out of bounds, wrong access and
# closed region each give the exact error and the link survives; see rma_errors.c.
here=$(dirname "$0")
"$here/run_pair.sh" rma_errors -k basic || exit $?
exec "$here/run_pair.sh" rma_errors -k scalable
