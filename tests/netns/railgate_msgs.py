"""Shared by the netns tests that look at a rail's traffic (dissector.sh,
capture.sh) or craft railgate messages (control_plane.sh): a header, a
JOIN, crafted bad messages, and the checks that the
messages a capture saw, by type, equal railgated's counters for the rail."""
import socket
import struct

JOIN, JOIN_ACK, CONTRIB, RESULT, ERROR, LEAVE, LEAVE_ACK, RTT_REPORT, PING, PONG, HELD = 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12


def header(version=2, t=CONTRIB, dt=0, flags=0, job=99, world=2, count=4, rank=0, token=1):
    return struct.pack(">BBBBIQHHHHQII", version, t, dt, flags, job, token, rank, world, 0, count, 0, 0, 0)


def join(job, token, rank, world, max_count, nonce):
    """A JOIN (fp32, default pool, no rail excluded, operation 0)."""
    return header(t=JOIN, job=job, world=world, count=0, rank=rank, token=token) + struct.pack(
        ">QHHIQ", max_count, 0, 0, 0, nonce)


# Each crafted message of job 99, by the drop reason railgated counts it as.
CRAFTED = {
    "rg_version": header(version=9) + bytes(16),
    "rg_flags": header(flags=0x80) + bytes(16),
    "rg_count_exceeds_payload": header(count=5) + bytes(16),
    "rg_world": header(world=0) + bytes(16),
}


def send_crafted(reasons, server="198.18.0.1", port=47000):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for r in reasons:
        s.sendto(CRAFTED[r], (server, port))


def counts_match(to, frm, c):
    """to, frm: Counters of message types into and out of the rail; c: the
    rail's entry of `railctl --json stats`. Prints each check."""
    d = c["drops"]
    checks = [
        ("JOINs in == joins + join errors", to[JOIN], c["joins"] + c["join_errors"]),
        ("CONTRIBs in == contributions + duplicates + retransmits answered with the kept result or HELD",
         to[CONTRIB], c["contributions"] + d.get("duplicate", 0) + c["results_resent"] + c["held"] - c["queried"]),
        ("HELDs out == held", frm[HELD], c["held"]),
        ("RESULTs out == results sent", frm[RESULT], c["results_sent"]),
        ("LEAVEs in == leaves + leaves acknowledged again + unknown", to[LEAVE],
         c["leaves"] + c.get("leaves_again", 0) + d.get("leave_unknown", 0)),
        ("RTT_REPORTs in == rtt reports", to[RTT_REPORT], c["rtt_reports"]),
        ("PINGs in == PONGs out + PINGs naming a chunk answered otherwise == pongs + queried",
         (to[PING], frm[PONG]), (c["pongs"] + c["queried"], c["pongs"])),
        ("JOIN_ACKs out == joins", frm[JOIN_ACK], c["joins"]),
        ("LEAVE_ACKs out == leaves + leaves acknowledged again", frm[LEAVE_ACK], c["leaves"] + c.get("leaves_again", 0)),
    ]
    ok = True
    for name, seen, counted in checks:
        print(f"{'ok' if seen == counted else 'MISMATCH'}: {name}: capture {seen}, railgated {counted}")
        ok &= seen == counted
    if frm[ERROR] < c["join_errors"]:
        print(f"MISMATCH: {frm[ERROR]} ERRORs out, fewer than the {c['join_errors']} refused JOINs")
        ok = False
    return ok
