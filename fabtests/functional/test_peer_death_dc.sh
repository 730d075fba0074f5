#!/bin/sh
# peer_death with FI_DELIVERY_COMPLETE sends that were acknowledged but never delivered when
# the receiver died: see test_peer_death.sh
exec "$(dirname "$0")/test_peer_death.sh" delivery
