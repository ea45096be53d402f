// libFuzzer target: the worker library against a hostile or broken
// railgated. A real client::worker joins and runs allreduces over a
// transport whose every received message comes from the fuzzer's input, as
// bytes through the worker-side parser (wire::parse_server_message): JOIN_ACK
// bodies, ERRORs with any code and text, results (and HELDs) for the chunks
// the worker sent with any field changed, PONGs, LEAVE_ACKs, and raw
// datagrams.
//
// Input: 4 bytes of job shape (world, rank, dtype, count, retries), then
// records [kind][len][len bytes]; see next_message(). When the input runs
// out, the transport answers as a railgated that refuses everything, so
// that each run ends in microseconds.
//
// Invariants, beyond no crash and no sanitizer report:
//   - every contribution the worker sends lies inside its tensor, has
//     count * dtype size == its bytes, and fits a UDP datagram;
//   - it goes to a rail the transport opened;
//   - open_rails() only gets rails that passed the worker's checks
//     (unicast address, port, MTU);
//   - allreduce() returns "" or an error; never both success and a failure.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "client/railgate/transport.hpp"
#include "client/railgate/worker.hpp"
#include "dataplane/proto/parse.hpp"

using namespace railgate;

namespace {

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz_worker: invariant broken: %s\n", what);
    std::abort();
}

struct input {
    const std::uint8_t* p;
    std::size_t n;
    bool take(std::size_t k, const std::uint8_t*& out) {
        if (n < k) return false;
        out = p;
        p += k;
        n -= k;
        return true;
    }
    std::uint8_t byte(std::uint8_t otherwise = 0) {
        const std::uint8_t* b;
        return take(1, b) ? *b : otherwise;
    }
};

struct sent_chunk {
    std::uint16_t slot;
    std::uint32_t gen, count;
    std::uint64_t offset;
    unsigned rail;
};

class fuzz_transport final : public client::transport {
public:
    fuzz_transport(input in, const client::worker_options& o, const std::uint8_t* tensor, std::size_t tensor_bytes)
        : in_(in), o_(o), tensor_(tensor), tensor_bytes_(tensor_bytes) {}

    unsigned n_rails() const noexcept override { return rails_; }
    const char* name() const noexcept override { return "fuzz"; }
    std::uint64_t dropped() const noexcept override { return dropped_; }

    std::string open_rails(std::span<const wire::rail_entry> rails, const std::function<void()>&) override {
        if (rails.empty() || rails.size() > wire::max_rails) broken("open_rails: rail count");
        for (const wire::rail_entry& e : rails)
            if (e.ip == 0 || e.ip >> 28 >= 0xe || e.udp_port == 0 || e.mtu < 256 || e.mtu > wire::max_mtu)
                broken("open_rails: a rail the worker should have refused");
        if (in_.byte() == 0xee) return "fuzz: cannot reach rail 1";
        rails_ = static_cast<unsigned>(rails.size());
        return "";
    }

    unsigned send(unsigned rail, const client::tx_msg* msgs, unsigned n) noexcept override {
        if (rail >= rails_) broken("send on a rail not opened");
        for (unsigned i = 0; i < n; ++i) {
            const wire::header& h = msgs[i].h;
            if (h.job_id != o_.job_id || h.job_token != o_.job_token || h.rank != o_.rank) broken("send: foreign header");
            if (h.type == wire::msg_type::join && msgs[i].bytes == wire::join_body_bytes)
                nonce_ = static_cast<std::uint32_t>(
                    wire::decode_join_body(static_cast<const std::uint8_t*>(msgs[i].payload)).nonce);
            if (h.type == wire::msg_type::leave) left_ = true;
            if (h.type != wire::msg_type::contrib) continue;
            const auto* p = static_cast<const std::uint8_t*>(msgs[i].payload);
            const std::size_t es = wire::dtype_size(h.dt);
            if (std::size_t{h.count} * es != msgs[i].bytes) broken("contrib: count and bytes disagree");
            if (h.count == 0 || h.count > 0xffff || msgs[i].bytes + wire::header_bytes > 65507)
                broken("contrib: does not fit a datagram");
            if (p < tensor_ || p + msgs[i].bytes > tensor_ + tensor_bytes_ ||
                static_cast<std::size_t>(p - tensor_) != h.offset * es)
                broken("contrib: payload outside the tensor or not at its offset");
            if (sent_.size() < 4096) sent_.push_back({h.slot, h.gen, h.count, h.offset, rail});
        }
        return n;
    }

    unsigned recv(unsigned rail, client::rx_msg* out, unsigned max) noexcept override {
        if (max == 0) return 0;
        buf_[rail & 1].clear();
        if (in_.n == 0) return refuse(rail, out);
        if (!next_message(rail)) return 0;
        std::vector<std::uint8_t>& b = buf_[rail & 1];
        std::span<const std::uint8_t> payload;
        if (wire::parse_server_message(b.data(), b.size(), out[0].h, payload) != drop_reason::none) {
            ++dropped_;
            return 0;
        }
        out[0].frag[0] = payload.data();
        out[0].frag_len[0] = static_cast<std::uint32_t>(payload.size());
        out[0].frag[1] = nullptr;
        out[0].frag_len[1] = 0;
        out[0].unchecked = false;
        return 1;
    }

private:
    wire::header templ(wire::msg_type t) const {
        wire::header h;
        h.type = t;
        h.job_id = o_.job_id;
        h.job_token = o_.job_token;
        h.rank = o_.rank;
        h.world_size = o_.world;
        h.dt = o_.dt;
        return h;
    }
    void put(unsigned rail, const wire::header& h, const std::uint8_t* body, std::size_t n) {
        std::vector<std::uint8_t>& b = buf_[rail & 1];
        b.resize(wire::header_bytes + n);
        wire::encode_header(h, b.data());
        if (n) std::memcpy(b.data() + wire::header_bytes, body, n);
    }

    // The input ran out: railgated refuses the JOIN, ends the operation
    // and acknowledges the LEAVE, so the run ends at once.
    unsigned refuse(unsigned rail, client::rx_msg* out) {
        static const char text[] = "fuzz: the end";
        wire::header h = templ(wire::msg_type::error);
        h.aux = static_cast<std::uint32_t>(wire::error_code::bad_request);
        h.gen = nonce_;
        if (left_) {
            h = templ(wire::msg_type::leave_ack);
            put(rail, h, nullptr, 0);
        } else {
            put(rail, h, reinterpret_cast<const std::uint8_t*>(text), sizeof text - 1);
            if (++refusals_ & 1) { // and, for an operation in progress, the transport's own error
                h.gen = client::transport_error_gen;
                h.aux = static_cast<std::uint32_t>(wire::error_code::aborted);
                put(rail, h, reinterpret_cast<const std::uint8_t*>(text), sizeof text - 1);
            }
        }
        std::span<const std::uint8_t> payload;
        const std::vector<std::uint8_t>& b = buf_[rail & 1];
        if (wire::parse_server_message(b.data(), b.size(), out[0].h, payload) != drop_reason::none)
            broken("refuse: railgate's own message does not parse");
        out[0] = client::rx_msg{out[0].h, {payload.data(), nullptr}, {static_cast<std::uint32_t>(payload.size()), 0}};
        return 1;
    }

    // One record: [kind][len][len bytes] -> a datagram in buf_.
    bool next_message(unsigned rail) {
        // A result waits a few polls for a chunk to answer (the worker polls
        // before it sends), then goes.
        if (in_.p[0] % 7 == 4 && sent_.empty() && ++waited_ < 8) return false;
        waited_ = 0;
        const std::uint8_t kind = in_.byte();
        const std::uint8_t len = in_.byte();
        const std::uint8_t* d;
        if (!in_.take(len, d)) {
            in_.n = 0;
            return false;
        }
        std::uint8_t pad[256] = {};
        std::memcpy(pad, d, len);
        switch (kind % 7) {
        case 0: // raw bytes
            put(rail, wire::header{}, nullptr, 0);
            buf_[rail & 1].assign(d, d + len);
            return true;
        case 1: { // JOIN_ACK: the body as given; gen from the first 4 bytes
            wire::header h = templ(wire::msg_type::join_ack);
            std::memcpy(&h.gen, pad, 4);
            h.aux = rail;
            put(rail, h, len > 4 ? d + 4 : nullptr, len > 4 ? len - 4u : 0);
            return true;
        }
        case 2: { // a well-formed JOIN_ACK from a few bytes (to reach the data path)
            wire::join_ack_body a;
            a.n_rails = static_cast<std::uint8_t>(1 + pad[0] % 3);
            a.pool_size = static_cast<std::uint16_t>(1 + pad[1] % 8);
            a.chunk_bytes = 64u << (pad[2] % 12);
            a.policy = pad[3] & 1 ? wire::rail_policy::lag : wire::rail_policy::rail;
            a.stall_ms = pad[4];
            a.excluded_rails = pad[5] & 0x80 ? pad[5] & ((1u << a.n_rails) - 1) : 0;
            for (unsigned r = 0; r < a.n_rails; ++r) {
                a.rails[r].ip = pad[6] == 0xff ? 0xe0000001u : 0xC6120001u + (r << 8);
                a.rails[r].udp_port = 47000;
                a.rails[r].mtu = pad[7] == 0xff ? 100 : 1500;
                a.rails[r].chunk_bytes = a.chunk_bytes;
            }
            std::uint8_t body[wire::join_ack_fixed_bytes + wire::max_rails * wire::rail_entry_bytes];
            const std::size_t n = wire::encode_join_ack_body(a, body);
            wire::header h = templ(wire::msg_type::join_ack);
            h.gen = pad[8];
            h.aux = rail;
            put(rail, h, body, n);
            return true;
        }
        case 3: { // ERROR: code, gen (the JOIN's nonce, the job's, or the transport's), text
            wire::header h = templ(wire::msg_type::error);
            h.aux = pad[0] % (wire::error_code_max + 2);
            h.gen = pad[1] % 3 == 0 ? nonce_ : pad[1] % 3 == 1 ? client::transport_error_gen : pad[2];
            std::memcpy(&h.offset, pad + 3, 8);
            put(rail, h, len > 11 ? d + 11 : nullptr, len > 11 ? len - 11u : 0);
            return true;
        }
        case 4: { // a result for a chunk the worker sent, maybe with a field changed
            if (sent_.empty()) return false;
            const sent_chunk& c = sent_[(pad[0] | pad[1] << 8) % sent_.size()];
            wire::header h = templ(wire::msg_type::result);
            h.slot = c.slot;
            h.gen = c.gen;
            h.offset = c.offset;
            h.count = c.count;
            switch (pad[2] % 8) {
            case 1: h.slot = static_cast<std::uint16_t>(pad[3] | pad[4] << 8); break;
            case 2: h.gen = pad[3]; break;
            case 3: h.offset = pad[3] | std::uint64_t{pad[4]} << 32; break;
            case 4: h.count = static_cast<std::uint16_t>(pad[3] | pad[4] << 8); break;
            case 5: h.dt = static_cast<wire::dtype>(pad[3] % wire::dtype_count); break;
            default: break;
            }
            // HELD for the chunk (railgated holds it, the slot waits for
            // another rank), header only or with a body the parser refuses.
            if (pad[2] % 8 >= 6) {
                h.type = wire::msg_type::held;
                h.count = 0;
                h.aux = pad[6];
            }
            const std::size_t bytes = h.type == wire::msg_type::held ? (pad[2] % 8 == 7 ? pad[7] : 0)
                                                                      : std::size_t{h.count} * wire::dtype_size(h.dt);
            std::vector<std::uint8_t> payload(bytes, pad[5]);
            put(rail, h, payload.data(), payload.size());
            return true;
        }
        case 5: { // PONG or LEAVE_ACK for an incarnation
            wire::header h = templ(pad[0] & 1 ? wire::msg_type::pong : wire::msg_type::leave_ack);
            h.gen = pad[1];
            put(rail, h, nullptr, 0);
            return true;
        }
        default: // nothing this poll
            return false;
        }
    }

    input in_;
    client::worker_options o_;
    const std::uint8_t* tensor_;
    std::size_t tensor_bytes_;
    unsigned rails_ = 1;
    std::uint64_t dropped_ = 0;
    std::uint32_t nonce_ = 0;
    bool left_ = false;
    unsigned refusals_ = 0, waited_ = 0;
    std::vector<sent_chunk> sent_;
    std::vector<std::uint8_t> buf_[2];
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 4) return 0;
    client::worker_options o;
    o.job_id = 7;
    o.job_token = 0x5eed5eed5eed5eedull;
    o.world = static_cast<std::uint16_t>(1 + data[0] % 4);
    o.rank = static_cast<std::uint16_t>(data[0] / 4 % o.world);
    o.dt = static_cast<wire::dtype>(data[1] % wire::dtype_count);
    const std::size_t count = data[2] * 37u * (data[3] & 2 ? 64 : 1);
    o.max_count = count ? count : 1;
    o.retries = data[3] & 1;
    o.join_timeout = std::chrono::milliseconds(20);
    o.op_timeout = std::chrono::milliseconds(20);
    o.peer_timeout = std::chrono::milliseconds(10);
    o.rto = std::chrono::microseconds(100);
    std::vector<std::uint8_t> tensor(count * wire::dtype_size(o.dt) + 1, 0x5a); // +1: never empty
    fuzz_transport t(input{data + 4, size - 4}, o, tensor.data(), tensor.size() - 1);
    client::worker w(t, o);
    static const bool verbose = std::getenv("FUZZ_WORKER_VERBOSE") != nullptr; // to check a corpus
    const std::string joined = w.join();
    if (verbose) std::fprintf(stderr, "join: %s\n", joined.empty() ? "ok" : joined.c_str());
    if (joined.empty()) {
        for (int op = 0; op < 3; ++op) {
            const std::string e = w.allreduce(tensor.data(), count, o.dt);
            if (verbose) std::fprintf(stderr, "allreduce %d: %s\n", op, e.empty() ? "ok" : e.c_str());
            if (e.empty() != (w.failed_with() == client::failure::none)) broken("allreduce: result and failure disagree");
            if (!e.empty() && !client::worker::recoverable(w.failed_with())) break;
        }
        w.leave();
    }
    return 0;
}
