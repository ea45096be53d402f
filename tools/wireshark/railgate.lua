-- Wireshark / tshark dissector for the railgate wire protocol, version 2
-- (dataplane/proto/PROTOCOL.md): UDP port 47000 by default (a preference).
--
--   tshark -o udp.try_heuristic_first:TRUE -X lua_script:tools/wireshark/railgate.lua -r rail0.pcapng -Y railgate
--   tshark -o udp.try_heuristic_first:TRUE -X lua_script:railgate.lua -r f.pcapng -T fields -e railgate.type -e railgate.job
-- (udp.try_heuristic_first: see the end of this file)
-- or copy it into Wireshark's personal plugins folder
-- (~/.local/lib/wireshark/plugins/). Installed in share/railgate/wireshark.
--
-- Every header field is a filter field (railgate.version, .type, .dtype,
-- .flags, .retransmit, .job, .token, .rank, .world, .slot, .count, .offset,
-- .gen, .aux), and so are the bodies: JOIN, JOIN_ACK and its rail entries,
-- ERROR code and reason, RTT_REPORT buckets, REGION. Invalid values (the
-- version, reserved flags, a count that disagrees with the length, a world
-- size out of range, a body of the wrong length) are expert warnings.

local rg = Proto("railgate", "railgate aggregation protocol")

local header_bytes = 40
local max_world = 64
local protocol_version = 2

local types = {
    [1] = "JOIN", [2] = "JOIN_ACK", [3] = "CONTRIB", [4] = "RESULT", [5] = "ERROR", [6] = "LEAVE",
    [7] = "LEAVE_ACK", [8] = "RTT_REPORT", [9] = "REGION", [10] = "PING", [11] = "PONG", [12] = "HELD",
}
local dtypes = { [0] = "fp32", [1] = "bf16", [2] = "fp16", [3] = "int32" }
local dtype_size = { [0] = 4, [1] = 2, [2] = 2, [3] = 4 }
local errors = {
    [0] = "none", [1] = "bad_token", [2] = "world_mismatch", [3] = "dtype_mismatch", [4] = "max_count_mismatch",
    [5] = "job_table_full", [6] = "bad_request", [7] = "aborted", [8] = "pool_mismatch", [9] = "job_in_use",
    [10] = "rank_taken", [11] = "rails_mismatch", [12] = "too_many_pending", [13] = "no_buffers",
    [14] = "rank_failed", [15] = "unknown_job", [16] = "expired", [17] = "rail_down", [18] = "op_mismatch", [19] = "rank_claimed",
    [20] = "shape_mismatch", [21] = "rails_changing", [22] = "operator_abort",
    [23] = "protocol_version",
}
local policies = { [0] = "rail", [1] = "lag" }
local lag_hashes = { [0] = "l2", [1] = "l3l4" }

local f = {
    version = ProtoField.uint8("railgate.version", "Version"),
    type = ProtoField.uint8("railgate.type", "Type", base.DEC, types),
    dtype = ProtoField.uint8("railgate.dtype", "Dtype", base.DEC, dtypes),
    flags = ProtoField.uint8("railgate.flags", "Flags", base.HEX),
    retransmit = ProtoField.bool("railgate.retransmit", "Retransmit", 8, nil, 0x01),
    reserved = ProtoField.uint8("railgate.flags.reserved", "Reserved flags", base.HEX, nil, 0xfe),
    job = ProtoField.uint32("railgate.job", "Job id"),
    token = ProtoField.uint64("railgate.token", "Job token", base.HEX),
    rank = ProtoField.uint16("railgate.rank", "Rank"),
    world = ProtoField.uint16("railgate.world", "World size"),
    slot = ProtoField.uint16("railgate.slot", "Slot"),
    count = ProtoField.uint16("railgate.count", "Count (elements)"),
    offset = ProtoField.uint64("railgate.offset", "Offset (elements)"),
    gen = ProtoField.uint32("railgate.gen", "Generation / incarnation / nonce"),
    aux = ProtoField.uint32("railgate.aux", "Aux"),
    -- RESULT's aux: the congestion railgated saw on the rank's contribution
    wait_us = ProtoField.uint32("railgate.result.wait_us", "Waited for the other ranks (us)", base.DEC, nil, 0x00ffffff),
    depth = ProtoField.uint32("railgate.result.depth", "Queued ahead of it at railgated (frames)", base.DEC, nil, 0x7f000000),
    ce = ProtoField.bool("railgate.result.ce", "Contribution came ECN CE", 32, nil, 0x80000000),
    payload = ProtoField.bytes("railgate.payload", "Payload"),
    -- JOIN
    max_count = ProtoField.uint64("railgate.join.max_count", "Max count"),
    pool_size = ProtoField.uint16("railgate.pool_size", "Pool size"),
    op = ProtoField.uint16("railgate.join.op", "Operation"),
    excluded = ProtoField.uint32("railgate.excluded_rails", "Excluded rails", base.HEX),
    nonce = ProtoField.uint64("railgate.join.nonce", "Nonce", base.HEX),
    -- JOIN's aux on a worker's rails after the first: the job's shape there
    shape_chunk = ProtoField.uint32("railgate.join.shape_chunk", "Job chunk bytes (its first rail's; 0: railgated chooses)",
                                    base.DEC, nil, 0x00ffffff),
    shape_rails = ProtoField.uint32("railgate.join.shape_rails", "Job's rails (its first rail's JOIN_ACK's; 0: not named)",
                                    base.DEC, nil, 0x7f000000),
    shape_lag = ProtoField.bool("railgate.join.shape_lag", "Job under LAG (its first rail's)", 32, nil, 0x80000000),
    -- JOIN_ACK
    rail_index = ProtoField.uint32("railgate.ack.rail_index", "Answering rail"),
    policy = ProtoField.uint8("railgate.ack.policy", "Policy", base.DEC, policies),
    n_rails = ProtoField.uint8("railgate.ack.n_rails", "Rails"),
    chunk_bytes = ProtoField.uint16("railgate.ack.chunk_bytes", "Chunk bytes (0: 64 KiB or more)"),
    lag_hash = ProtoField.uint8("railgate.ack.lag_hash", "LAG hash", base.DEC, lag_hashes),
    chunk_log2 = ProtoField.uint8("railgate.ack.chunk_log2", "Chunk log2"),
    stall_ms = ProtoField.uint16("railgate.ack.stall_ms", "Stall time (ms)"),
    rail = ProtoField.none("railgate.rail", "Rail"),
    rail_ip = ProtoField.ipv4("railgate.rail.ip", "Address"),
    rail_port = ProtoField.uint16("railgate.rail.port", "UDP port"),
    rail_mtu = ProtoField.uint16("railgate.rail.mtu", "MTU"),
    rail_mac = ProtoField.ether("railgate.rail.mac", "MAC"),
    rail_chunk = ProtoField.uint16("railgate.rail.chunk_bytes", "Chunk bytes"),
    -- ERROR
    error_code = ProtoField.uint32("railgate.error.code", "Error code", base.DEC, errors),
    error_text = ProtoField.string("railgate.error.text", "Reason"),
    -- RTT_REPORT
    bucket = ProtoField.uint16("railgate.rtt.bucket", "Histogram bucket"),
    samples = ProtoField.uint32("railgate.rtt.samples", "Samples"),
    -- REGION
    region_addr = ProtoField.uint64("railgate.region.addr", "Address", base.HEX),
    region_rkey = ProtoField.uint32("railgate.region.rkey", "rkey", base.HEX),
    region_bytes = ProtoField.uint32("railgate.region.bytes", "Bytes"),
}
local fl = {}
for _, v in pairs(f) do fl[#fl + 1] = v end
rg.fields = fl

local e = {
    short = ProtoExpert.new("railgate.short", "Shorter than the 40-byte header", expert.group.MALFORMED, expert.severity.ERROR),
    version = ProtoExpert.new("railgate.bad_version", "Unknown protocol version", expert.group.PROTOCOL, expert.severity.WARN),
    type = ProtoExpert.new("railgate.bad_type", "Unknown message type", expert.group.PROTOCOL, expert.severity.WARN),
    dtype = ProtoExpert.new("railgate.bad_dtype", "Unknown dtype", expert.group.PROTOCOL, expert.severity.WARN),
    flags = ProtoExpert.new("railgate.reserved_flags", "Reserved flag bits set", expert.group.PROTOCOL, expert.severity.WARN),
    world = ProtoExpert.new("railgate.bad_world", "World size out of range 1..64", expert.group.PROTOCOL, expert.severity.WARN),
    rank = ProtoExpert.new("railgate.bad_rank", "Rank not below the world size", expert.group.PROTOCOL, expert.severity.WARN),
    count = ProtoExpert.new("railgate.bad_count", "Count disagrees with the payload length", expert.group.MALFORMED, expert.severity.WARN),
    body = ProtoExpert.new("railgate.bad_body", "Body length wrong for the message type", expert.group.MALFORMED, expert.severity.WARN),
    code = ProtoExpert.new("railgate.bad_error_code", "Unknown error code", expert.group.PROTOCOL, expert.severity.WARN),
    error = ProtoExpert.new("railgate.error", "railgate ERROR", expert.group.RESPONSE_CODE, expert.severity.NOTE),
    retransmit = ProtoExpert.new("railgate.retransmit", "Retransmitted contribution", expert.group.SEQUENCE, expert.severity.NOTE),
}
rg.experts = { e.short, e.version, e.type, e.dtype, e.flags, e.world, e.rank, e.count, e.body, e.code, e.error, e.retransmit }

rg.prefs.port = Pref.uint("UDP port", 47000, "railgated's UDP port (railgated --port)")

local function body_len_ok(tree, body, want, name)
    if body:len() ~= want then
        tree:add_proto_expert_info(e.body, string.format("Body length wrong for the message type: %s body is %d bytes, not %d",
                                                         name, body:len(), want))
        return false
    end
    return true
end

function rg.dissector(buf, pinfo, root)
    local len = buf:len()
    if len == 0 then return 0 end
    pinfo.cols.protocol = "railgate"
    local tree = root:add(rg, buf(), "railgate")
    if len < header_bytes then
        tree:add_proto_expert_info(e.short, string.format("%d bytes", len))
        pinfo.cols.info = "railgate (truncated)"
        return len
    end
    local version, t, dt, flags = buf(0, 1):uint(), buf(1, 1):uint(), buf(2, 1):uint(), buf(3, 1):uint()
    local vi = tree:add(f.version, buf(0, 1))
    if version ~= protocol_version then vi:add_proto_expert_info(e.version) end
    local ti = tree:add(f.type, buf(1, 1))
    if not types[t] then ti:add_proto_expert_info(e.type) end
    local di = tree:add(f.dtype, buf(2, 1))
    if not dtypes[dt] then di:add_proto_expert_info(e.dtype) end
    local fi = tree:add(f.flags, buf(3, 1))
    fi:add(f.retransmit, buf(3, 1))
    fi:add(f.reserved, buf(3, 1))
    if bit.band(flags, 0xfe) ~= 0 then fi:add_proto_expert_info(e.flags) end
    if bit.band(flags, 0x01) ~= 0 then fi:add_proto_expert_info(e.retransmit) end
    tree:add(f.job, buf(4, 4))
    tree:add(f.token, buf(8, 8))
    local rank, world = buf(16, 2):uint(), buf(18, 2):uint()
    local ri = tree:add(f.rank, buf(16, 2))
    local wi = tree:add(f.world, buf(18, 2))
    if world < 1 or world > max_world then wi:add_proto_expert_info(e.world)
    elseif rank >= world then ri:add_proto_expert_info(e.rank) end
    tree:add(f.slot, buf(20, 2))
    local count = buf(22, 2):uint()
    local ci = tree:add(f.count, buf(22, 2))
    tree:add(f.offset, buf(24, 8))
    tree:add(f.gen, buf(32, 4))
    local aux = buf(36, 4):uint()
    local body = buf(header_bytes)
    local name = types[t] or string.format("type %d", t)
    local info = string.format("%s job=%d rank=%d/%d", name, buf(4, 4):uint(), rank, world)

    if t == 3 or t == 4 then
        -- CONTRIB / RESULT: count elements of dtype, exactly.
        local at = tree:add(f.aux, buf(36, 4))
        if t == 4 then
            at:add(f.wait_us, buf(36, 4))
            at:add(f.depth, buf(36, 4))
            at:add(f.ce, buf(36, 4))
        end
        local size = dtype_size[dt]
        if size and count * size ~= body:len() then
            ci:add_proto_expert_info(e.count, string.format("Count disagrees with the payload length: %d x %d bytes != %d",
                                                            count, size, body:len()))
        end
        if body:len() > 0 then tree:add(f.payload, body) end
        info = info .. string.format(" slot=%d gen=%d offset=%s count=%d", buf(20, 2):uint(), buf(32, 4):uint(),
                                     tostring(buf(24, 8):uint64()), count)
        if bit.band(flags, 0x01) ~= 0 then info = info .. " [retransmit]" end
    elseif t == 1 then
        local at = tree:add(f.aux, buf(36, 4))
        at:add(f.shape_chunk, buf(36, 4))
        at:add(f.shape_rails, buf(36, 4))
        at:add(f.shape_lag, buf(36, 4))
        if body_len_ok(tree, body, 24, "JOIN") then
            tree:add(f.max_count, body(0, 8))
            tree:add(f.pool_size, body(8, 2))
            tree:add(f.op, body(10, 2))
            tree:add(f.excluded, body(12, 4))
            tree:add(f.nonce, body(16, 8))
            info = info .. string.format(" op=%d pool=%d", body(10, 2):uint(), body(8, 2):uint())
        end
    elseif t == 2 then
        tree:add(f.rail_index, buf(36, 4))
        if body:len() < 16 then
            body_len_ok(tree, body, 16, "JOIN_ACK")
        else
            local n = body(3, 1):uint()
            tree:add(f.pool_size, body(0, 2))
            tree:add(f.policy, body(2, 1))
            tree:add(f.n_rails, body(3, 1))
            tree:add(f.chunk_bytes, body(4, 2))
            tree:add(f.lag_hash, body(6, 1))
            tree:add(f.chunk_log2, body(7, 1))
            tree:add(f.stall_ms, body(8, 2))
            tree:add(f.excluded, body(12, 4))
            if body_len_ok(tree, body, 16 + 16 * n, "JOIN_ACK") then
                for i = 0, n - 1 do
                    local r = body(16 + 16 * i, 16)
                    local rt = tree:add(f.rail, r):set_text(string.format("Rail %d: %s:%d mtu %d", i,
                        tostring(r(0, 4):ipv4()), r(4, 2):uint(), r(6, 2):uint()))
                    rt:add(f.rail_ip, r(0, 4))
                    rt:add(f.rail_port, r(4, 2))
                    rt:add(f.rail_mtu, r(6, 2))
                    rt:add(f.rail_mac, r(8, 6))
                    rt:add(f.rail_chunk, r(14, 2))
                end
            end
            info = info .. string.format(" rails=%d pool=%d chunk=%d", n, body(0, 2):uint(), body(4, 2):uint())
        end
    elseif t == 5 then
        local code_item = tree:add(f.error_code, buf(36, 4))
        local text = body:len() > 0 and body:string() or ""
        if body:len() > 0 then tree:add(f.error_text, body) end
        if not errors[aux] then code_item:add_proto_expert_info(e.code) end
        tree:add_proto_expert_info(e.error, string.format("%s: %s", errors[aux] or tostring(aux), text))
        info = info .. string.format(" %s: %s", errors[aux] or tostring(aux), text)
    elseif t == 8 then
        tree:add(f.aux, buf(36, 4))
        if count < 1 or count > 64 or body:len() ~= 6 * count then
            body_len_ok(tree, body, 6 * count, "RTT_REPORT")
        else
            for i = 0, count - 1 do
                local b = body(6 * i, 6)
                local bt = tree:add(rg, b, string.format("Bucket %d: %d samples", b(0, 2):uint(), b(2, 4):uint()))
                bt:add(f.bucket, b(0, 2))
                bt:add(f.samples, b(2, 4))
            end
        end
    elseif t == 9 then
        tree:add(f.aux, buf(36, 4))
        if body_len_ok(tree, body, 16, "REGION") then
            tree:add(f.region_addr, body(0, 8))
            tree:add(f.region_rkey, body(8, 4))
            tree:add(f.region_bytes, body(12, 4))
        end
    else
        -- LEAVE, LEAVE_ACK, PING, PONG, HELD (aux: ranks the slot waits for;
        -- 0: the slot completed, and its result waits in railgated's queue): no body.
        local at = tree:add(f.aux, buf(36, 4))
        if types[t] then body_len_ok(tree, body, 0, name) end
        info = info .. string.format(" gen=%d", buf(32, 4):uint())
        if t == 12 then
            at:append_text(aux == 0 and " (the result waits in railgated's queue)" or " (ranks the slot waits for)")
            info = info .. (aux == 0 and " result-queued" or string.format(" waiting=%d", aux))
        end
    end
    pinfo.cols.info = info
    return len
end

local registered
local function register()
    local udp = DissectorTable.get("udp.port")
    if registered then udp:remove(registered, rg) end
    registered = rg.prefs.port
    udp:add(registered, rg)
end
function rg.prefs_changed() register() end
register()

-- Wireshark tries the lower of a datagram's two ports first, and a
-- worker's ephemeral port (32768-60999) may be one another dissector
-- claims (44818 enip, 37008 tzsp, 34962 pn_rt, ...): that worker's
-- datagrams would be decoded as that protocol. As a heuristic too (to or
-- from railgated's port, this version), railgate wins on its port whatever
-- the other when heuristics go first:
--   tshark -o udp.try_heuristic_first:TRUE -X lua_script:railgate.lua ...
-- (Wireshark: Analyze > Enabled Protocols, or the UDP preference "Try
-- heuristic sub-dissectors first").
local function heuristic(buf, pinfo, root)
    if pinfo.src_port ~= rg.prefs.port and pinfo.dst_port ~= rg.prefs.port then return false end
    if buf:len() < header_bytes or buf(0, 1):uint() ~= protocol_version then return false end
    rg.dissector(buf, pinfo, root)
    return true
end
rg:register_heuristic("udp", heuristic)
