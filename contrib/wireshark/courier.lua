-- courier.lua: a Wireshark / tshark dissector for courier's wire protocol, version 5
-- (prov/courier/src/proto/cour_wire_fmt.h is the format's truth, docs/protocol.md explains it).
--
-- Courier endpoints bind any UDP port, so this is a heuristic dissector on UDP: a datagram is
-- taken as courier when its version byte is 5, its type is known, its flags are known bits and
-- its length is one the type allows, or when it is a packed datagram (first byte 0xc5: several
-- packets, each decoded on its own, wire/cour_wire.h) whose layout holds and whose packets
-- are courier's. "Decode As... courier" forces it on a port.
--
-- Use:   tshark -X lua_script:contrib/wireshark/courier.lua -r FILE.pcapng
--        or copy it where Wireshark looks for Lua plugins (`make install` does:
--        tshark -G folders lists "Global Lua Plugins" and "Personal Lua Plugins").
-- Captures come from FI_COURIER_TRACE (man fi_courier): their "courier-shm" interface holds
-- the packets that went through shared-memory rings, "courier-udp" the UDP datagrams.
--
-- Written for the Lua of Wireshark 3.6 to 4.4 (5.1 to 5.4): no bit operators, no bit library;
-- flag tests are arithmetic on numbers below 2^32.

local courier = Proto("courier", "courier RDM transport")

local WIRE_VERSION = 5
local PACK_MARK, PACK_HDR = 0xc5, 8  -- a packed datagram: mark, 0, count, 0 (4 bytes), packets
local PACK_PADDED = 1                -- byte 1 of a padded pack: zeros before the length table
local BASE_LEN, OP_LEN = 32, 80
local MAC_LEN = 32          -- authentication trailer, when flag MAC is set (UDP only)
local SACK_EXT_MAX = 512    -- bytes of an ACK's extended SACK bitmap
local HELLO_LEN = 80
local CM_HDR_LEN, CM_DATA_MAX = 16, 256
local TWO32 = 4294967296

local T = { ACK = 1, RESET = 2, EAGER = 3, RTS = 4, CTS = 5, RDATA = 6, DONE = 7, WRITE = 8,
	    READ_REQ = 9, READ_RESP = 10, RMA_RESP = 11, ATOMIC = 12, DGRAM = 13, HELLO = 14,
	    CM = 15, SHORT = 16 }
local type_names = {}
for name, v in pairs(T) do type_names[v] = name end

local function sequenced(t) return t >= T.EAGER and t <= T.ATOMIC end
local function has_op_hdr(t) return t ~= T.ACK and t ~= T.RESET and t ~= T.HELLO and t ~= T.CM end

-- flag bits of the base header, in bit order
local FLAGS = {
	{ "TAGGED",  "tagged message: matched on tag" },
	{ "CQ_DATA", "data carries remote CQ data" },
	{ "DC",      "delivery complete: the sender wants a DONE once placed" },
	{ "PCSUM",   "crc covers the payload too" },
	{ "PROBE",   "liveness probe: answer with an ACK at once" },
	{ "CMA",     "single copy (process_vm_readv/writev)" },
	{ "PUSHED",  "the initiator already wrote the data through the target's window" },
	{ "WANT",    "the sender ran short of credit units: grant more" },
	{ "RXCTX",   "rx_id names the target's receive context" },
	{ "PART",    "one part of a multi-iovec RMA, not its last: no target events" },
	{ "MAC",     "an authentication trailer ends the datagram" },
	{ "DUP",     "on ACK: a packet delivered already arrived again (a needless resend)" },
	{ "HELD",    "the ACK this packet carries is late: not a congestion sample" },
	{ "NOWAIT",  "nothing at the sender waits for this message's ACK: it may wait for the answer" },
	{ "READY",   "the sender has a receive posted for the answer: the ACK may ride on it" },
}
local F_PCSUM, F_CMA, F_PUSHED, F_RXCTX, F_PART, F_MAC = 3, 5, 6, 8, 9, 10
local FLAGS_LIMIT = 32768   -- bits above READY are unknown: not courier

local function bit(v, n) return math.floor(v / 2 ^ n) % 2 == 1 end

-- what a flag means on this type of packet, where docs/protocol.md gives it a meaning of its own
local function flag_meaning(t, n)
	if n == F_CMA then
		if t == T.RTS then return "offset is the sender's buffer: the receiver pulls" end
		if t == T.CTS then
			return "offset 0: pulled, done; else write [offset, total_len) at raddr yourself"
		end
		if t == T.RDATA then return "written (the sender's half of a split copy)" end
		if t == T.WRITE or t == T.READ_REQ then
			return "bare: offset is the initiator's buffer, the target pulls or pushes"
		end
		if t == T.RMA_RESP then
			return "a grant: copy [offset, total_len) at raddr under lease tag, generation data"
		end
		if t == T.DONE then return "the initiator's half of a granted RMA is over" end
	elseif n == F_RXCTX and (t == T.EAGER or t == T.RTS or t == T.SHORT) then
		return "rx_id is the scalable endpoint's receive context"
	end
	return FLAGS[n + 1][2]
end

local cm_ops = { [1] = "CONNREQ", [2] = "ACCEPT", [3] = "REJECT", [4] = "ESTABLISHED",
		 [5] = "SHUTDOWN", [6] = "SHUTDOWN_ACK", [7] = "RETRY" }
local atomic_ops = { [0] = "FI_MIN", "FI_MAX", "FI_SUM", "FI_PROD", "FI_LOR", "FI_LAND",
		     "FI_BOR", "FI_BAND", "FI_LXOR", "FI_BXOR", "FI_ATOMIC_READ",
		     "FI_ATOMIC_WRITE", "FI_CSWAP", "FI_CSWAP_NE", "FI_CSWAP_LE", "FI_CSWAP_LT",
		     "FI_CSWAP_GE", "FI_CSWAP_GT", "FI_MSWAP" }
local atomic_types = { [0] = "FI_INT8", "FI_UINT8", "FI_INT16", "FI_UINT16", "FI_INT32",
		       "FI_UINT32", "FI_INT64", "FI_UINT64", "FI_FLOAT", "FI_DOUBLE",
		       "FI_FLOAT_COMPLEX", "FI_DOUBLE_COMPLEX", "FI_LONG_DOUBLE",
		       "FI_LONG_DOUBLE_COMPLEX", "FI_INT128", "FI_UINT128" }
local atomic_kinds = { [0] = "plain (fi_atomic)", "fetch (fi_fetch_atomic)",
		       "compare (fi_compare_atomic)" }
-- courier's prov_errno values (proto/cour_errno.h), as RMA_RESP and DONE carry them in rx_id
local prov_errnos = { [0] = "COUR_E_OK", "COUR_E_TRUNC", "COUR_E_CANCELED",
		      "COUR_E_UNREACHABLE", "COUR_E_PEER_RESET", "COUR_E_NOMSG",
		      "COUR_E_BAD_ADDR", "COUR_E_EP_CLOSED", "COUR_E_SEND", "COUR_E_BAD_KEY",
		      "COUR_E_BOUNDS", "COUR_E_ACCESS", "COUR_E_REMOTE", "COUR_E_PROTOCOL",
		      "COUR_E_CMA_REFUSED", "COUR_E_NO_ROUTE" }
local hello_flags = { { 0, "REPLY" }, { 1, "MAPPED" }, { 2, "PULLS" } }   -- bit, name

---------------------------------------------------------------------------------------------
-- fields

local pf = {}
local function field(key, f) pf[key] = f end

field("version",     ProtoField.uint8("courier.version", "Version", base.DEC))
field("type",        ProtoField.uint8("courier.type", "Type", base.DEC, type_names))
field("flags",       ProtoField.uint16("courier.flags", "Flags", base.HEX))
for n, f in ipairs(FLAGS) do
	local name = f[1]:lower()
	field("flag_" .. name, ProtoField.bool("courier.flags." .. name, f[1], 16, nil,
					       2 ^ (n - 1), f[2]))
end
field("crc",         ProtoField.uint32("courier.crc", "CRC32C", base.HEX))
field("src_session", ProtoField.uint32("courier.src_session", "Source session", base.HEX))
field("dst_session", ProtoField.uint32("courier.dst_session", "Destination session",
				       base.HEX))
field("seq",         ProtoField.uint32("courier.seq", "Sequence number", base.DEC))
field("hold",        ProtoField.uint32("courier.hold",
				       "Held (us since the kernel took the packet acknowledged)",
				       base.DEC))
field("ack",         ProtoField.uint32("courier.ack", "Cumulative ACK (next expected)",
				       base.DEC))
field("sack",        ProtoField.uint32("courier.sack", "SACK bitmap", base.HEX))
field("sack_held",   ProtoField.uint32("courier.sack.held", "Held (SACKed) packet", base.DEC))
field("credits",     ProtoField.uint32("courier.credits", "Credit limit (256-byte units)",
				       base.DEC))

field("msg_id",      ProtoField.uint32("courier.msg_id", "Message id", base.DEC))
field("rx_id",       ProtoField.uint32("courier.rx_id", "rx_id", base.DEC))
field("rx_ctx",      ProtoField.uint32("courier.rx_ctx", "Receive context", base.DEC))
field("prov_errno",  ProtoField.uint32("courier.prov_errno", "prov_errno", base.DEC,
				       prov_errnos))
field("atomic_op",   ProtoField.uint32("courier.atomic.op", "Atomic op", base.DEC, atomic_ops,
				       0x000000ff))
field("atomic_dt",   ProtoField.uint32("courier.atomic.datatype", "Datatype", base.DEC,
				       atomic_types, 0x0000ff00))
field("atomic_kind", ProtoField.uint32("courier.atomic.kind", "Kind", base.DEC, atomic_kinds,
				       0x00030000))
field("atomic_count", ProtoField.uint32("courier.atomic.count", "Elements", base.DEC, nil,
					0xfffc0000))
field("tag",         ProtoField.uint64("courier.tag", "Tag", base.HEX))
field("data",        ProtoField.uint64("courier.data", "Data", base.HEX))
field("total_len",   ProtoField.uint64("courier.total_len", "Total length", base.DEC))
field("offset",      ProtoField.uint64("courier.offset", "Offset", base.DEC))
field("raddr",       ProtoField.uint64("courier.raddr", "Remote address", base.HEX))
field("payload",     ProtoField.bytes("courier.payload", "Payload"))
field("payload_len", ProtoField.uint32("courier.payload_len", "Payload length", base.DEC))

field("sack_ext",    ProtoField.bytes("courier.sack_ext", "Extended SACK bitmap"))
field("sack_ext_held", ProtoField.uint32("courier.sack_ext.held", "Held (SACKed) packet",
					 base.DEC))

field("hello_boot",  ProtoField.guid("courier.hello.boot_id", "Boot id"))
field("hello_netns", ProtoField.uint64("courier.hello.netns", "Network namespace inode",
				       base.DEC))
field("hello_pidns", ProtoField.uint64("courier.hello.pidns", "Pid namespace inode", base.DEC))
field("hello_pid",   ProtoField.uint32("courier.hello.pid", "Pid", base.DEC))
field("hello_fd",    ProtoField.int32("courier.hello.fd", "Ring fd", base.DEC))
field("hello_nonce", ProtoField.uint64("courier.hello.nonce", "Ring nonce", base.HEX))
field("hello_bytes", ProtoField.uint64("courier.hello.bytes", "Ring size", base.DEC))
field("hello_probe", ProtoField.uint64("courier.hello.probe", "Single-copy probe address",
				       base.HEX))
field("hello_uid",   ProtoField.uint32("courier.hello.uid", "Uid", base.DEC))
field("hello_flags", ProtoField.uint32("courier.hello.flags", "Flags", base.HEX))
field("hello_box_gen", ProtoField.uint32("courier.hello.box_gen",
				       "Mailbox for the receiver: generation (0: none)", base.DEC))
field("hello_box_idx", ProtoField.uint32("courier.hello.box_idx", "Mailbox index", base.DEC))
field("ring_put",    ProtoField.uint32("courier.ring_put",
				     "Ring put (in a ring the crc field counts the sender's puts)",
				     base.DEC))
for _, f in ipairs(hello_flags) do
	field("hello_" .. f[2]:lower(),
	      ProtoField.bool("courier.hello.flags." .. f[2]:lower(), f[2], 32, nil, 2 ^ f[1]))
end

field("cm_conn_id",  ProtoField.uint64("courier.cm.conn_id", "Connection id", base.HEX))
field("cm_op",       ProtoField.uint32("courier.cm.op", "CM op", base.DEC, cm_ops))
field("cm_cookie",   ProtoField.uint64("courier.cm.cookie", "Cookie (base ack, sack)", base.HEX))
field("cm_data_len", ProtoField.uint32("courier.cm.data_len", "CM data length", base.DEC))
field("cm_data",     ProtoField.bytes("courier.cm.data", "CM data"))

field("mac_stream",  ProtoField.uint64("courier.mac.stream", "Stream id", base.HEX))
field("mac_counter", ProtoField.uint32("courier.mac.counter", "Counter", base.DEC))
field("mac_time",    ProtoField.absolute_time("courier.mac.time", "Sender's time", base.UTC))
field("mac_tag",     ProtoField.bytes("courier.mac.tag", "Tag (UMAC-128)"))
field("mac_nonce",   ProtoField.bytes("courier.mac.nonce", "Nonce (stream id || counter)"))

field("pack_count",  ProtoField.uint16("courier.pack.count", "Packets packed", base.DEC))
field("pack_lens",   ProtoField.bytes("courier.pack.lengths", "Packet lengths (2 bytes each)"))
field("pack_index",  ProtoField.uint16("courier.pack.index", "Packet of the pack", base.DEC))
field("path",        ProtoField.string("courier.path", "Path"))
field("retrans",     ProtoField.framenum("courier.retransmission", "Retransmission of frame",
					 base.NONE, frametype.NONE))

local fields = {}
for _, f in pairs(pf) do fields[#fields + 1] = f end
courier.fields = fields

local ex = {
	retrans   = ProtoExpert.new("courier.retransmission.expert",
				    "Retransmission of a sequenced packet",
				    expert.group.SEQUENCE, expert.severity.NOTE),
	truncated = ProtoExpert.new("courier.truncated", "Not captured whole (snap length)",
				    expert.group.UNDECODED, expert.severity.CHAT),
	bad       = ProtoExpert.new("courier.bad", "Not a valid courier packet",
				    expert.group.MALFORMED, expert.severity.WARN),
}
courier.experts = { ex.retrans, ex.truncated, ex.bad }

local f_iface_name = Field.new("frame.interface_name")
local f_iface_id = Field.new("frame.interface_id")

---------------------------------------------------------------------------------------------
-- retransmissions: per capture, keyed by direction, source session and sequence number

local first_seen = {}   -- key -> { frame = first frame, dst = its dst_session }
local retrans_of = {}   -- frame number -> the frame it repeats

function courier.init()
	first_seen = {}
	retrans_of = {}
end

-- A repeat of (direction, src_session, seq) whose dst_session is the same, or was still 0
-- (not yet learned) in the earlier copy, is a retransmission; another dst_session is a new
-- session with numbers starting over.
-- (idx: the packet's place in a packed datagram, 0 for a lone one)
local function note_sequenced(pinfo, src_s, dst_s, seq, idx)
	local me = pinfo.number .. "/" .. idx
	if pinfo.visited then return retrans_of[me] end
	local key = tostring(pinfo.src) .. "/" .. pinfo.src_port .. ">" .. tostring(pinfo.dst) ..
		    "/" .. pinfo.dst_port .. "|" .. src_s .. "|" .. seq
	local e = first_seen[key]
	if e and e.id ~= me and (e.dst == dst_s or e.dst == 0) then
		retrans_of[me] = e.frame
		if dst_s ~= 0 then e.dst = dst_s end
	elseif not e or e.id ~= me then
		first_seen[key] = { frame = pinfo.number, id = me, dst = dst_s }
	end
	return retrans_of[me]
end

---------------------------------------------------------------------------------------------
-- recognising a courier datagram

local function path_of(pinfo)
	local n = f_iface_name()
	if n then
		local s = tostring(n.value)
		if s:find("shm") then return "shm", s end
		return "udp", s
	end
	local id = f_iface_id()
	if id and id.value == 1 then return "shm", "interface 1" end
	return "udp", nil
end


-- The body's length (the datagram less its trailer), or nil when tvb is not courier. A ring
-- packet has no trailer even with the MAC flag (an ACK finished for UDP, then put in a ring),
-- nor has a packet inside a packed datagram (inner: the pack has the trailer).
local function courier_body_len(tvb, pinfo, inner)
	local len, cap = tvb:reported_len(), tvb:len()
	if len < BASE_LEN or cap < 16 then return nil end
	local t, flags = tvb(1, 1):uint(), tvb(2, 2):le_uint()
	if tvb(0, 1):uint() ~= WIRE_VERSION or t < T.ACK or t > T.SHORT or flags >= FLAGS_LIMIT then
		return nil
	end
	local body = len
	if bit(flags, F_MAC) and path_of(pinfo) ~= "shm" and not inner then
		body = len - MAC_LEN
	end
	if body < BASE_LEN then return nil end
	local seq = cap >= 20 and tvb(16, 4):le_uint() or 0
	if t == T.ACK then
		if body - BASE_LEN > SACK_EXT_MAX then return nil end
	elseif t == T.RESET then
		if body ~= BASE_LEN then return nil end
	elseif t == T.HELLO then
		if body ~= BASE_LEN + HELLO_LEN or not bit(flags, F_PCSUM) then return nil end
	elseif t == T.CM then
		if body < BASE_LEN + CM_HDR_LEN or seq ~= 0 then return nil end
		if cap >= BASE_LEN + CM_HDR_LEN then
			local dl = tvb(44, 4):le_uint()
			if dl > CM_DATA_MAX or body ~= BASE_LEN + CM_HDR_LEN + dl then return nil end
		end
	elseif body < OP_LEN then
		return nil
	end
	-- (an ACK's seq field is its hold time, anything else unsequenced has 0 there)
	if not sequenced(t) and t ~= T.ACK and seq ~= 0 then return nil end
	return body
end

local function pad8(n) return math.ceil(n / 8) * 8 end

-- A packed datagram's layout (wire/cour_wire.h): its body (less the trailer, which its
-- packets' MAC flag announces), packet count, and each packet's offset and length; nil when
-- tvb is not one. Cut by the snap length, the packets are not known: lens is nil then.
local function pack_layout(tvb, pinfo)
	local len, cap = tvb:reported_len(), tvb:len()
	if len < PACK_HDR + BASE_LEN + 2 or cap < PACK_HDR + 4 or tvb(0, 1):uint() ~= PACK_MARK or
	   tvb(1, 1):uint() > PACK_PADDED or tvb(4, 4):le_uint() ~= 0 or path_of(pinfo) == "shm" then
		return nil
	end
	local padded = tvb(1, 1):uint() == PACK_PADDED
	local n = tvb(2, 2):le_uint()
	local body = len
	if tvb(PACK_HDR, 1):uint() ~= WIRE_VERSION then return nil end
	if bit(tvb(PACK_HDR + 2, 2):le_uint(), F_MAC) then body = len - MAC_LEN end
	if n == 0 or body < PACK_HDR + 2 * n then return nil end
	if cap < body then return body, n, nil end
	local tbl, off, offs, lens = body - 2 * n, PACK_HDR, {}, {}
	for i = 0, n - 1 do
		local l = tvb(tbl + 2 * i, 2):le_uint()
		if l == 0 or off + pad8(l) > tbl then return nil end
		if courier_body_len(tvb(off, l):tvb(), pinfo, true) ~= l then return nil end
		offs[#offs + 1], lens[#lens + 1] = off, l
		off = off + pad8(l)
	end
	-- (padded: zeros up to the table, so that a GSO run went on past it)
	if off ~= tbl and not padded then return nil end
	return body, n, lens, offs
end

---------------------------------------------------------------------------------------------
-- dissection

local function flags_text(flags)
	local s = {}
	for n, f in ipairs(FLAGS) do
		if bit(flags, n - 1) then s[#s + 1] = f[1] end
	end
	return table.concat(s, "|")
end

-- the held packets of a bitmap of nbits bits starting at ack + 1, as items under tree
local function list_held(tree, field_held, range_of_bit, ack, nbits, is_set)
	local held = {}
	for i = 0, nbits - 1 do
		if is_set(i) then
			local s = (ack + 1 + i) % TWO32
			tree:add(field_held, range_of_bit(i), s):set_generated()
			held[#held + 1] = s
		end
	end
	return held
end

local function dissect_base(tvb, pinfo, tree, t, flags)
	tree:add(pf.version, tvb(0, 1))
	tree:add(pf.type, tvb(1, 1))
	local fi = tree:add_le(pf.flags, tvb(2, 2))
	if flags ~= 0 then fi:append_text(" (" .. flags_text(flags) .. ")") end
	for n, f in ipairs(FLAGS) do
		local item = fi:add_le(pf["flag_" .. f[1]:lower()], tvb(2, 2))
		if bit(flags, n - 1) then item:append_text(": " .. flag_meaning(t, n - 1)) end
	end
	tree:add_le(pf.crc, tvb(4, 4))
	tree:add_le(pf.src_session, tvb(8, 4))
	tree:add_le(pf.dst_session, tvb(12, 4))
	tree:add_le(t == T.ACK and pf.hold or pf.seq, tvb(16, 4))
	local ack, sack = tvb(20, 4):le_uint(), tvb(24, 4):le_uint()
	tree:add_le(pf.ack, tvb(20, 4))
	local si = tree:add_le(pf.sack, tvb(24, 4))
	local held = list_held(si, pf.sack_held, function() return tvb(24, 4) end, ack, 32,
			       function(i) return bit(sack, i) end)
	if #held > 0 then si:append_text(" (held: " .. table.concat(held, ", ") .. ")") end
	tree:add_le(pf.credits, tvb(28, 4))
end

local function dissect_op(tvb, tree, t, flags)
	tree:add_le(pf.msg_id, tvb(32, 4))
	local rx = tvb(36, 4)
	local rxi = tree:add_le(pf.rx_id, rx)
	local v = rx:le_uint()
	if t == T.ATOMIC then
		rxi:add_le(pf.atomic_op, rx)
		rxi:add_le(pf.atomic_dt, rx)
		rxi:add_le(pf.atomic_kind, rx)
		rxi:add_le(pf.atomic_count, rx)
	elseif (t == T.EAGER or t == T.RTS or t == T.SHORT) and bit(flags, F_RXCTX) then
		rxi:add_le(pf.rx_ctx, rx)
	elseif t == T.RMA_RESP or t == T.DONE then
		rxi:add_le(pf.prov_errno, rx)
	elseif t == T.WRITE and not bit(flags, F_PART) and v ~= 0 then
		rxi:append_text(" (the whole write's length: last part)")
	elseif t == T.CTS or t == T.RDATA then
		rxi:append_text(" (the receiver's id)")
	end
	local ti = tree:add_le(pf.tag, tvb(40, 8))
	if t == T.WRITE or t == T.READ_REQ or t == T.ATOMIC then
		ti:append_text(" (remote key)")
	elseif t == T.RMA_RESP and bit(flags, F_CMA) then
		ti:append_text(" (lease)")
	end
	tree:add_le(pf.data, tvb(48, 8))
	tree:add_le(pf.total_len, tvb(56, 8))
	local oi = tree:add_le(pf.offset, tvb(64, 8))
	if bit(flags, F_CMA) and (t == T.RTS or t == T.WRITE or t == T.READ_REQ) then
		oi:append_text(" (the sender's buffer address)")
	end
	tree:add_le(pf.raddr, tvb(72, 8))
end

local function dissect_payload(tvb, tree, off, body)
	local n = body - off
	tree:add(pf.payload_len, n):set_generated()
	local have = math.min(tvb:len(), body) - off
	if n > 0 and have > 0 then tree:add(pf.payload, tvb(off, have)) end
	return n
end

local function dissect_sack_ext(tvb, tree, ack, body)
	local n = body - BASE_LEN
	if n <= 0 then return end
	local have = math.min(tvb:len(), body) - BASE_LEN
	if have <= 0 then return end
	local r = tvb(BASE_LEN, have)
	local bi = tree:add(pf.sack_ext, r)
	local held = list_held(bi, pf.sack_ext_held,
			       function(i) return tvb(BASE_LEN + math.floor(i / 8), 1) end,
			       ack, have * 8,
			       function(i)
				       return bit(tvb(BASE_LEN + math.floor(i / 8), 1):uint(), i % 8)
			       end)
	bi:append_text(" (" .. #held .. " held)")
end

local function dissect_hello(tvb, tree)
	local h = tree:add(courier, tvb(BASE_LEN, HELLO_LEN), "HELLO: host identity and ring")
	local o = BASE_LEN
	h:add(pf.hello_boot, tvb(o, 16))
	h:add_le(pf.hello_netns, tvb(o + 16, 8))
	h:add_le(pf.hello_pidns, tvb(o + 24, 8))
	h:add_le(pf.hello_pid, tvb(o + 32, 4))
	h:add_le(pf.hello_fd, tvb(o + 36, 4))
	h:add_le(pf.hello_nonce, tvb(o + 40, 8))
	h:add_le(pf.hello_bytes, tvb(o + 48, 8))
	h:add_le(pf.hello_probe, tvb(o + 56, 8))
	h:add_le(pf.hello_uid, tvb(o + 64, 4))
	local fi = h:add_le(pf.hello_flags, tvb(o + 68, 4))
	local v, names = tvb(o + 68, 4):le_uint(), {}
	for _, f in ipairs(hello_flags) do
		fi:add_le(pf["hello_" .. f[2]:lower()], tvb(o + 68, 4))
		if bit(v, f[1]) then names[#names + 1] = f[2] end
	end
	h:add_le(pf.hello_box_gen, tvb(o + 72, 4))
	h:add_le(pf.hello_box_idx, tvb(o + 76, 4))
	return tvb(o + 32, 4):le_uint(), table.concat(names, "|")
end

local function dissect_cm(tvb, tree, body)
	local o = BASE_LEN
	local c = tree:add(courier, tvb(o, math.min(tvb:len(), body) - o), "CM")
	c:add_le(pf.cm_conn_id, tvb(o, 8))
	c:add_le(pf.cm_op, tvb(o + 8, 4))
	c:add_le(pf.cm_cookie, tvb(20, 8))
	c:add_le(pf.cm_data_len, tvb(o + 12, 4))
	local dl = tvb(o + 12, 4):le_uint()
	local have = math.min(tvb:len(), body) - (o + CM_HDR_LEN)
	if dl > 0 and have > 0 then c:add(pf.cm_data, tvb(o + CM_HDR_LEN, math.min(dl, have))) end
	return cm_ops[tvb(o + 8, 4):le_uint()] or "?", tvb(o, 8):le_uint64()
end

local function dissect_mac(tvb, tree, body)
	local m = tree:add(courier, tvb(body, MAC_LEN), "Authentication trailer")
	m:add_le(pf.mac_stream, tvb(body, 8))
	m:add_le(pf.mac_counter, tvb(body + 8, 4))
	m:add_le(pf.mac_time, tvb(body + 12, 4), NSTime.new(tvb(body + 12, 4):le_uint(), 0))
	m:add(pf.mac_tag, tvb(body + 16, 16))
	m:add(pf.mac_nonce, tvb(body, 12)):set_generated()
end

-- One packet: its tree under tree, and the text of its Info column (idx: its place in a
-- packed datagram, 0 for a lone one).
local function dissect(tvb, pinfo, tree, body, idx)
	local len, cap = tvb:reported_len(), tvb:len()
	local t, flags = tvb(1, 1):uint(), tvb(2, 2):le_uint()
	local name = type_names[t]
	local path, ifname = path_of(pinfo)

	pinfo.cols.protocol = "courier"
	local root = tree:add(courier, tvb(), "courier, " .. name)
	root:add(pf.path, path):set_generated()
	if ifname then root:append_text(" [" .. ifname .. "]") end

	local need = has_op_hdr(t) and OP_LEN or BASE_LEN
	if t == T.HELLO then need = BASE_LEN + HELLO_LEN end
	if t == T.CM then need = BASE_LEN + CM_HDR_LEN end
	if cap < math.min(need, body) then
		-- the header itself is cut: show what is there
		root:add_proto_expert_info(ex.truncated, "header cut at " .. cap .. " bytes")
		if cap >= BASE_LEN then dissect_base(tvb, pinfo, root, t, flags) end
		return name .. " [header not captured]", root
	end
	dissect_base(tvb, pinfo, root, t, flags)
	local seq, ack = tvb(16, 4):le_uint(), tvb(20, 4):le_uint()
	local info = { name }
	if sequenced(t) then info[#info + 1] = "seq=" .. seq end
	if t ~= T.CM then info[#info + 1] = "ack=" .. ack end
	if t == T.ACK and seq ~= 0 then info[#info + 1] = "hold=" .. seq .. "us" end

	if has_op_hdr(t) then
		dissect_op(tvb, root, t, flags)
		local n = dissect_payload(tvb, root, OP_LEN, body)
		info[#info + 1] = "len=" .. n
		if t == T.ATOMIC then
			local v = tvb(36, 4):le_uint()
			info[#info + 1] = (atomic_ops[v % 256] or "?") .. "/" ..
					  (atomic_types[math.floor(v / 256) % 256] or "?")
		end
	elseif t == T.ACK then
		dissect_sack_ext(tvb, root, ack, body)
		if tvb(24, 4):le_uint() ~= 0 or body > BASE_LEN then info[#info + 1] = "SACK" end
	elseif t == T.HELLO then
		local pid, hf = dissect_hello(tvb, root)
		info[#info + 1] = "pid=" .. pid
		if hf ~= "" then info[#info + 1] = hf end
	elseif t == T.CM then
		local op, conn = dissect_cm(tvb, root, body)
		info[#info + 1] = op
		info[#info + 1] = "conn=0x" .. conn:tohex()
	end
	if flags ~= 0 then info[#info + 1] = "[" .. flags_text(flags) .. "]" end

	if t == T.SHORT and path ~= "shm" then
		root:add(courier, tvb(1, 1), "SHORT outside a ring: receivers drop it"):set_generated()
	end
	if bit(flags, F_MAC) and path == "shm" then
		root:add(courier, tvb(2, 2), "MAC flag set, but a ring packet carries no trailer")
			:set_generated()
	end
	if path == "shm" then
		-- no checksum in a ring: the field orders the packet against the sender's
		-- mailbox entries, which no capture shows (docs/protocol.md, Mailboxes)
		root:add_le(pf.ring_put, tvb(4, 4)):set_generated()
	end
	if body < len then
		if cap >= len then
			dissect_mac(tvb, root, body)
		else
			root:add_proto_expert_info(ex.truncated,
						   "authentication trailer not captured")
		end
	end
	if cap < len then
		root:add_proto_expert_info(ex.truncated, cap .. " of " .. len .. " bytes captured")
	end

	if sequenced(t) then
		local orig = note_sequenced(pinfo, tvb(8, 4):le_uint(), tvb(12, 4):le_uint(), seq,
					    idx)
		if orig then
			local ri = root:add(pf.retrans, orig)
			ri:set_generated()
			ri:add_proto_expert_info(ex.retrans, "Retransmission of frame " .. orig)
			info[#info + 1] = "[retransmission of #" .. orig .. "]"
		end
	end
	local text = table.concat(info, " ")
	if path == "shm" then text = "[shm] " .. text end
	return text, root
end

-- A packed datagram: each packet decoded on its own, under one tree with the pack's trailer
local function dissect_pack(tvb, pinfo, tree, body, n, lens, offs)
	local len, cap = tvb:reported_len(), tvb:len()
	pinfo.cols.protocol = "courier"
	local root = tree:add(courier, tvb(), "courier packed datagram, " .. n .. " packets")
	root:add(pf.path, "udp"):set_generated()
	root:add_le(pf.pack_count, tvb(2, 2))
	if not lens then
		root:add_proto_expert_info(ex.truncated, cap .. " of " .. len .. " bytes captured")
		pinfo.cols.info = "[pack of " .. n .. ", not captured whole]"
		return
	end
	local texts = {}
	for i = 1, n do
		local text, sub = dissect(tvb(offs[i], lens[i]):tvb(), pinfo, root, lens[i], i - 1)
		sub:add(pf.pack_index, i - 1):set_generated()
		texts[#texts + 1] = text
	end
	root:add(pf.pack_lens, tvb(body - 2 * n, 2 * n))
	if body < len then dissect_mac(tvb, root, body) end
	pinfo.cols.info = "[pack of " .. n .. "] " .. table.concat(texts, "; ")
end

local function heuristic(tvb, pinfo, tree)
	local pbody, n, lens, offs = pack_layout(tvb, pinfo)
	if pbody then
		dissect_pack(tvb, pinfo, tree, pbody, n, lens, offs)
		return true
	end
	local body = courier_body_len(tvb, pinfo)
	if not body then return false end
	pinfo.cols.info = dissect(tvb, pinfo, tree, body, 0)
	return true
end

-- forced on a port (Decode As): a datagram that is not courier says so instead of being hidden
function courier.dissector(tvb, pinfo, tree)
	local pbody, n, lens, offs = pack_layout(tvb, pinfo)
	if pbody then
		dissect_pack(tvb, pinfo, tree, pbody, n, lens, offs)
		return tvb:len()
	end
	local body = courier_body_len(tvb, pinfo)
	if not body then
		pinfo.cols.protocol = "courier"
		local root = tree:add(courier, tvb())
		root:add_proto_expert_info(ex.bad)
		return 0
	end
	pinfo.cols.info = dissect(tvb, pinfo, tree, body, 0)
	return tvb:len()
end

courier:register_heuristic("udp", heuristic)
DissectorTable.get("udp.port"):add_for_decode_as(courier)
