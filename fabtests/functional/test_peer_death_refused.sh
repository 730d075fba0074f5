#!/bin/sh
# peer_death over UDP with the default (minutes-long) peer timeout: the dead receiver's host
# refuses our packets (ICMP port unreachable), which fails the sends at once; see
# test_peer_death.sh
exec "$(dirname "$0")/test_peer_death.sh" refused
