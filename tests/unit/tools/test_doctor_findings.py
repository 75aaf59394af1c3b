"""Doctor's judgement of a connection's host and encryption, without a database."""

from __future__ import annotations

from mempalace_pg.tools.doctor import (
    autoprewarm_finding,
    encryption_finding,
    index_memory_finding,
    is_local_host,
)


def test_which_hosts_stay_on_this_machine():
    for host in (
        "/var/run/postgresql",
        "@abstract",
        "localhost",
        "127.0.0.1",
        "127.9.9.9",
        "::1",
        "[::1]",
        None,
        "",
    ):
        assert is_local_host(host), host
    for host in ("db.lan", "192.168.1.20", "10.0.0.5", "2001:db8::1", "postgres"):
        assert not is_local_host(host), host


def test_an_unencrypted_or_unverified_connection_to_another_host_is_warned():
    status, finding, fix = encryption_finding("db.lan", False, "prefer")
    assert status == "warn" and "not encrypted" in finding and "sslmode=verify-full" in fix
    status, finding, fix = encryption_finding("db.lan", True, "require")
    assert status == "warn" and "sslmode=require does not check" in finding and "sslrootcert" in fix
    assert encryption_finding("db.lan", True, "verify-full")[0] == "ok"
    assert encryption_finding("127.0.0.1", False, "disable")[0] == "ok"


def test_vector_indexes_larger_than_shared_buffers_are_warned_with_a_size_to_set():
    mb = 2**20
    assert index_memory_finding(100 * mb, 128 * mb) == (
        "ok",
        "the vector indexes (100 MB) fit in shared_buffers (128 MB)",
        None,
    )
    status, finding, fix = index_memory_finding(600 * mb, 128 * mb)
    # 600 MB and a quarter more, rounded up to 256 MB
    assert status == "warn" and "600 MB, more than shared_buffers (128 MB)" in finding
    assert "shared_buffers = '768MB'" in fix and "restart" in fix
    assert "shared_buffers = '2304MB'" in index_memory_finding(1700 * mb, 512 * mb)[2]


def test_a_big_palace_on_a_server_without_autoprewarm_is_warned():
    mb = 2**20
    assert autoprewarm_finding(True, 6000 * mb)[0] == "ok"
    # small indexes are read back in soon enough by the searches themselves
    status, finding, fix = autoprewarm_finding(False, 100 * mb)
    assert status == "ok" and "no autoprewarm" in finding and fix is None
    status, finding, fix = autoprewarm_finding(False, 1200 * mb)
    assert status == "warn" and "1,200 MB" in finding and "from disk" in finding
    assert "shared_preload_libraries" in fix and "pg_prewarm" in fix and "restart" in fix
