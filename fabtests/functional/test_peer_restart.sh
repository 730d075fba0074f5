#!/bin/sh
# peer_death with the receiver restarted at once: see test_peer_death.sh
exec "$(dirname "$0")/test_peer_death.sh" restart-now
