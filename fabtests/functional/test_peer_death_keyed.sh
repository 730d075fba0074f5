#!/bin/sh
# peer_death_keyed: test_peer_death.sh's restart (the restarted receiver answers RESET, which
# must be authenticated and prove its session) and refused modes, with a key.
here=$(dirname "$0")
COUR_PEER_DEATH_KEYED=1; export COUR_PEER_DEATH_KEYED
"$here/test_peer_death.sh" restart-now || exit $?
exec "$here/test_peer_death.sh" refused
