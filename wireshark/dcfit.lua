-- Wireshark dissector for DCFIT checking messages: what pfcswitch writes into the padding
-- of the PFC frames it sends between switches to find PFC deadlocks (see the README's
-- "Deadlock lab"). Wireshark shows such a frame as a plain PFC (CBFC) frame; this
-- post-dissector adds the message under it and to the Info column, and its fields
-- (dcfit.origin_switch, dcfit.seq, ...) can be filtered on and printed with tshark -e.
--
-- Layout, after the eight pause times (the frame's bytes 34 to 53 when untagged):
--   magic "DCFT" (4)  version (1)  flags (1)  origin switch id (4)  origin port (2)
--   sequence number (4)  hops travelled (2)  priorities followed (1, a bit per priority;
--   0 from senders of version 1 before the field: every priority the frame pauses)
--
-- Install: copy this file into Wireshark's personal Lua plugins folder
-- (~/.local/lib/wireshark/plugins/ on Linux; Help > About > Folders shows it), or load it
-- for one run: tshark -X lua_script:wireshark/dcfit.lua -r capture.pcap -Y dcfit

local dcfit = Proto("dcfit", "DCFIT checking message (pfcswitch)")

local MAGIC = 0x44434654 -- "DCFT"
local VERSION = 1
local LEN = 19
-- From the MAC Control opcode to the padding: opcode, class-enable vector, eight times.
local PADDING_AFTER_OPCODE = 2 + 2 + 16

local f = dcfit.fields
f.magic = ProtoField.string("dcfit.magic", "Magic")
f.version = ProtoField.uint8("dcfit.version", "Version")
f.flags = ProtoField.uint8("dcfit.flags", "Flags (reserved)", base.HEX)
f.origin_switch = ProtoField.uint32("dcfit.origin_switch", "Origin switch id", base.DEC_HEX)
f.origin_port = ProtoField.uint16("dcfit.origin_port", "Origin port")
f.seq = ProtoField.uint32("dcfit.seq", "Sequence number")
f.hops = ProtoField.uint16("dcfit.hops", "Hops travelled")
f.prios = ProtoField.uint8("dcfit.prios", "Priorities followed", base.HEX)
local prio_fields = {}
for p = 0, 7 do
    prio_fields[p] = ProtoField.bool("dcfit.prios.p" .. p, "Priority " .. p, 8, nil, 2 ^ p)
    f["prio" .. p] = prio_fields[p]
end

local eth_type = Field.new("eth.type")
local macc_opcode = Field.new("macc.opcode")

function dcfit.dissector(tvb, pinfo, tree)
    local types = { eth_type() }
    local opcode = macc_opcode()
    if #types == 0 or types[#types].value ~= 0x8808 or not opcode or opcode.value ~= 0x0101 then
        return
    end
    local at = opcode.offset + PADDING_AFTER_OPCODE
    if tvb:len() < at + LEN or tvb(at, 4):uint() ~= MAGIC or tvb(at + 4, 1):uint() ~= VERSION then
        return
    end
    local t = tree:add(dcfit, tvb(at, LEN))
    t:add(f.magic, tvb(at, 4))
    t:add(f.version, tvb(at + 4, 1))
    t:add(f.flags, tvb(at + 5, 1))
    t:add(f.origin_switch, tvb(at + 6, 4))
    t:add(f.origin_port, tvb(at + 10, 2))
    t:add(f.seq, tvb(at + 12, 4))
    t:add(f.hops, tvb(at + 16, 2))
    local prios = tvb(at + 18, 1)
    local pt = t:add(f.prios, prios)
    if prios:uint() == 0 then
        pt:append_text(" (every priority the frame pauses)")
    end
    for p = 0, 7 do
        pt:add(prio_fields[p], prios)
    end
    local origin, port = tvb(at + 6, 4):uint(), tvb(at + 10, 2):uint()
    local seq, hops = tvb(at + 12, 4):uint(), tvb(at + 16, 2):uint()
    t:append_text(string.format(", origin %u port %u, seq %u, %u hops", origin, port, seq, hops))
    pinfo.cols.protocol:set("PFC+DCFIT")
    pinfo.cols.info:append(string.format(" [DCFIT origin %u:%u seq %u hops %u]", origin, port, seq, hops))
end

register_postdissector(dcfit)
