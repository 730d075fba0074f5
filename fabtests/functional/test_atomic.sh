#!/bin/sh
# atomic sweep over two processes, in both key modes: every op x datatype x form that the
# provider offers, checked against a reference; see atomic.c and run_pair.sh.
here=$(dirname "$0")
"$here/run_pair.sh" atomic -k basic || exit $?
exec "$here/run_pair.sh" atomic -k scalable
