#!/bin/sh
# mr_endpoint over two processes: FI_MR_ENDPOINT regions answer their own endpoint only, the
# binding errors of fi_mr(3), and an endpoint that cannot close under its regions; see
# mr_endpoint.c.
exec "$(dirname "$0")/run_pair.sh" mr_endpoint
