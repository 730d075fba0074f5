#!/usr/bin/env python3
"""trace_craft.py FILE: write a pcapng capture of courier packets crafted with known field
values, one of each kind a run does not easily make (an ACK with an extended SACK bitmap and
an authentication trailer, a HELLO with one, an atomic, a refused RMA, CM, RESET, a datagram
over IPv6, a retransmission, a ring packet with the MAC flag and no trailer, a packed
datagram of two packets with a trailer, one of them a retransmission, a padded packed datagram
of one) and one UDP datagram
that is not courier. test_trace.sh reads it
back through contrib/wireshark/courier.lua and compares every field with what is written here
(the layout is prov/courier/src/proto/cour_wire_fmt.h's; this file is independent of the C
writer, util/cour_pcapng.c, on purpose)."""
import socket
import struct
import sys

ACK, RESET, EAGER, RMA_RESP, ATOMIC, DGRAM, HELLO, CM, SHORT = 1, 2, 3, 11, 12, 13, 14, 15, 16
F_TAGGED, F_CQ_DATA, F_DC, F_PCSUM, F_RXCTX, F_MAC, F_HELD, F_NOWAIT = (1, 2, 4, 8, 256, 1024,
                                                                4096, 8192)


def base(typ, flags, src=0x5e55a001, dst=0x5e55b002, seq=0, ack=0, sack=0, credits=64,
         crc=0x0badc0de, version=5):
    return struct.pack("<BBHIIIIIII", version, typ, flags, crc, src, dst, seq, ack, sack,
                       credits)


def op(msg_id=0, rx_id=0, tag=0, data=0, total_len=0, offset=0, raddr=0):
    return struct.pack("<IIQQQQQ", msg_id, rx_id, tag, data, total_len, offset, raddr)


def mac(stream, counter, secs, tag):
    return struct.pack("<QII", stream, counter, secs) + tag


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def ip_udp(src, dst, sport, dport, payload):
    udp_len = 8 + len(payload)
    if ":" not in src:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 1, 0x4000, 64, 17, 0,
                         socket.inet_pton(socket.AF_INET, src),
                         socket.inet_pton(socket.AF_INET, dst))
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        return ip + struct.pack("!HHHH", sport, dport, udp_len, 0) + payload
    s6 = socket.inet_pton(socket.AF_INET6, src)
    d6 = socket.inet_pton(socket.AF_INET6, dst)
    udp = struct.pack("!HHHH", sport, dport, udp_len, 0) + payload
    c = csum(s6 + d6 + struct.pack("!IxxxB", udp_len, 17) + udp) or 0xffff
    udp = udp[:6] + struct.pack("!H", c) + udp[8:]
    return struct.pack("!IHBB", 6 << 28, udp_len, 17, 64) + s6 + d6 + udp


def block(btype, body):
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def opt(code, val):
    return struct.pack("<HH", code, len(val)) + val + b"\0" * (-len(val) % 4)


def main(path):
    packets = []
    # ephemeral ports, as courier binds: a fixed low port may be another protocol's (5000 is
    # TAPA's, whose dissector then claims what it can)
    a4, b4 = ("198.18.0.1", 41000), ("198.18.0.2", 42000)

    def add(payload, src=a4, dst=b4):
        packets.append(ip_udp(src[0], dst[0], src[1], dst[1], payload))

    # 1 ACK: sack bits 0 and 2 (101, 103 held), extended bitmap bits 0, 2, 40 (101, 103, 141),
    # packet 99 held 250 us by its receiver (the seq field of an ACK)
    ext = bytearray(8)
    for i in (0, 2, 40):
        ext[i // 8] |= 1 << (i % 8)
    add(base(ACK, F_PCSUM | F_MAC, seq=250, ack=100, sack=0b101) + bytes(ext) +
        mac(0x1122334455667788, 7, 1700000000, bytes([0xaa] * 16)))
    # 2 EAGER to receive context 3, tagged, with CQ data, delivery complete
    add(base(EAGER, F_TAGGED | F_CQ_DATA | F_DC | F_RXCTX, seq=5, ack=9) +
        op(msg_id=9, rx_id=3, tag=0xfeedface, data=0x1234, total_len=10) + b"0123456789")
    # 3 ATOMIC: FI_CSWAP (12) on FI_UINT64 (7), compare kind (2), 3 elements
    add(base(ATOMIC, 0, seq=6, ack=9) +
        op(msg_id=10, rx_id=12 | 7 << 8 | 2 << 16 | 3 << 18, tag=0x77, total_len=24,
           raddr=0x7f0000001000) + bytes(48))
    # 4 RMA_RESP refusing msg 10: COUR_E_BOUNDS (10), its ACK late (HELD)
    add(base(RMA_RESP, F_HELD, seq=7, ack=9) + op(msg_id=10, rx_id=10), src=b4, dst=a4)
    # 5 HELLO with a trailer: pid 4242, fd 7, flags REPLY|MAPPED, mailbox 2 of generation 5
    hello = (bytes(range(16)) + struct.pack("<QQIiQQQIIII", 4026531840, 4026531836, 4242, 7,
                                            0xc0ffee, 4390912, 0x7ffd0000, 1000, 3, 5, 2))
    add(base(HELLO, F_PCSUM | F_MAC, src=0x5e55a001, dst=0) + hello +
        mac(0x99, 8, 1700000001, bytes([0xbb] * 16)))
    # 6 CM ACCEPT of connection 0xabcdef with 5 bytes of data
    add(base(CM, F_PCSUM, src=0, dst=0, credits=0) + struct.pack("<QII", 0xabcdef, 2, 5) +
        b"hello")
    # 7 RESET
    add(base(RESET, 0, src=0x5e55b002, dst=0x5e55a001), src=b4, dst=a4)
    # 8 packet 2 again: a retransmission
    add(base(EAGER, F_TAGGED | F_CQ_DATA | F_DC | F_RXCTX, seq=5, ack=9) +
        op(msg_id=9, rx_id=3, tag=0xfeedface, data=0x1234, total_len=10) + b"0123456789")
    # 9 DGRAM over IPv6
    add(base(DGRAM, 0, src=0x5e55a001, dst=0) + op(total_len=4) + b"abcd",
        src=("2001:db8::1", 7000), dst=("2001:db8::2", 7001))
    # 10 not courier: version 2
    add(base(EAGER, 0, seq=1, version=2) + op())
    # 11 through a ring (interface 1): an ACK finished for UDP (flag MAC) but with no trailer
    add(base(ACK, F_MAC, ack=7))
    # 12 through a ring: a SHORT message, tagged with CQ data, outside the sequence (seq 0)
    add(base(SHORT, F_TAGGED | F_CQ_DATA, ack=11) +
        op(msg_id=42, tag=5, data=0x66, total_len=3) + b"abc")
    # 13 a packed datagram with a trailer (wire/cour_wire.h): a new EAGER (an inject: NOWAIT),
    # then packet 2 again (a retransmission inside a pack), each padded to 8 bytes, then their
    # lengths
    a = base(EAGER, F_TAGGED | F_MAC | F_NOWAIT, seq=8, ack=9) + op(msg_id=11, tag=0x99, total_len=5) + b"hello"
    b = (base(EAGER, F_TAGGED | F_CQ_DATA | F_DC | F_RXCTX | F_MAC, seq=5, ack=9) +
         op(msg_id=9, rx_id=3, tag=0xfeedface, data=0x1234, total_len=10) + b"0123456789")
    pad = lambda x: x + b"\0" * (-len(x) % 8)
    add(struct.pack("<BBHI", 0xc5, 0, 2, 0) + pad(a) + pad(b) + struct.pack("<HH", len(a), len(b)) +
        mac(0xcc, 9, 1700000002, bytes([0xcc] * 16)))
    # 14 a padded packed datagram (byte 1: 1): one EAGER, the last piece of its message, then
    # zeros up to the length table, so that the GSO run it left in went on past it
    c = base(EAGER, F_TAGGED, seq=12, ack=9) + op(msg_id=12, tag=0x77, total_len=6) + b"padded"
    body = struct.pack("<BBHI", 0xc5, 1, 1, 0) + pad(c)
    add(body + b"\0" * (200 - 2 - len(body)) + struct.pack("<H", len(c)))
    ifaces = [0] * 10 + [1, 1, 0, 0]

    out = block(0x0a0d0d0a, struct.pack("<IHHq", 0x1a2b3c4d, 1, 0, -1) + opt(0, b""))
    for name in (b"courier-udp", b"courier-shm"):
        out += block(1, struct.pack("<HHI", 101, 0, 0) + opt(2, name) + opt(9, b"\x09") +
                     opt(0, b""))
    ts = 1700000000 * 10**9
    for i, p in enumerate(packets):
        t = ts + i * 1000
        out += block(6, struct.pack("<IIIII", ifaces[i], t >> 32, t & 0xffffffff, len(p), len(p)) +
                     p + b"\0" * (-len(p) % 4) + opt(0, b""))
    with open(path, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main(sys.argv[1])
