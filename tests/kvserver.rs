//! The `kvserver` example's server on each backend: a short checked load with known keys (no
//! lost or wrong value), exact replies to scripted requests, malformed input (garbage bytes,
//! overlong lines, a client gone mid-request) answered with an error or a close while other
//! clients keep being served, and a shutdown that joins every thread it started.
#![cfg(not(any(futexkit_loom, futexkit_shuttle)))]

use futexkit_support::kv::load;
use futexkit_support::kv::server;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use load::Connection;
use server::{Backend, Request, Server};

fn any_port() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// Sends `request` and returns the reply line.
fn ask(c: &mut Connection, request: &[u8]) -> String {
    let mut reply = Vec::new();
    c.exchange(request, &mut reply)
        .unwrap_or_else(|e| panic!("{}: {e}", load::show(request)));
    String::from_utf8_lossy(&reply).into_owned()
}

fn stop(server: Server, expected_at_least: usize) {
    let backend = server.backend();
    let threads = server.shutdown();
    assert_eq!(threads.joined, threads.spawned, "{backend}: {threads:?}");
    assert_eq!(threads.still_running, 0, "{backend}: {threads:?}");
    assert!(
        threads.spawned >= expected_at_least,
        "{backend}: {threads:?}"
    );
}

#[test]
fn every_backend_answers_a_checked_load_and_joins_every_thread() {
    for backend in Backend::ALL.into_iter().chain(Backend::SPLIT) {
        let server = Server::start(any_port(), backend, 3).unwrap();
        let mut config = load::Config::new(server.addr(), 4, Duration::from_secs(30), 2000);
        config.keys = 32;
        // More SETs and DELs than the default mix, so every kind of reply is checked often.
        config.get_percent = 50;
        config.del_percent = 10;
        let report = load::run(&config).unwrap();
        assert_eq!(report.errors, 0, "{backend}: {:?}", report.first_errors);
        assert_eq!(report.ops, 2000, "{backend}");
        assert_eq!(report.latency.len(), 2000, "{backend}");

        // Scripted exchange with exact replies; keys shared across connections.
        let mut a = Connection::open(server.addr()).unwrap();
        let mut b = Connection::open(server.addr()).unwrap();
        assert_eq!(ask(&mut a, b"GET shared\n"), "NOT_FOUND");
        assert_eq!(ask(&mut a, b"SET shared hello world\n"), "OK");
        assert_eq!(ask(&mut b, b"GET shared\n"), "VALUE hello world");
        assert_eq!(ask(&mut b, b"SET shared \xc3\xa9t\xc3\xa9\r\n"), "OK");
        assert_eq!(ask(&mut a, b"GET shared\r\n"), "VALUE \u{e9}t\u{e9}");
        assert_eq!(ask(&mut a, b"DEL shared\n"), "DELETED");
        assert_eq!(ask(&mut b, b"DEL shared\n"), "NOT_FOUND");
        assert_eq!(ask(&mut b, b"GET shared\n"), "NOT_FOUND");
        // Pipelined requests are answered in order.
        let mut c = Connection::open(server.addr()).unwrap();
        let burst: Vec<u8> = (0..100)
            .flat_map(|i| format!("SET p{i} v{i}\nGET p{i}\n").into_bytes())
            .collect();
        let mut reply = Vec::new();
        c.exchange(&burst, &mut reply).unwrap();
        assert_eq!(reply, b"OK");
        for i in 0..100 {
            if i > 0 {
                c.read_line(&mut reply).unwrap();
                assert_eq!(reply, b"OK", "{backend}");
            }
            c.read_line(&mut reply).unwrap();
            assert_eq!(reply, format!("VALUE v{i}").as_bytes(), "{backend}");
        }
        drop((a, b, c));
        // 3 workers, the accept thread, 4 load connections and 3 here.
        stop(server, 3 + 1 + 4 + 3);
    }
}

/// Reads until the server closes. The server reads what the client still sends before it
/// closes, so the close is a FIN after the reply, not a reset that could discard it.
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return got,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) => panic!("waiting for the server to close: {e}"),
        }
    }
}

#[test]
fn malformed_requests_get_an_error_or_a_close_and_others_keep_being_served() {
    for backend in Backend::ALL {
        let server = Server::start(any_port(), backend, 2).unwrap();
        let addr = server.addr();
        let mut bystander = Connection::open(addr).unwrap();
        assert_eq!(ask(&mut bystander, b"SET steady 1\n"), "OK");

        // Malformed lines: each gets an ERROR and the connection stays usable.
        let mut c = Connection::open(addr).unwrap();
        let mut too_long_key = b"GET ".to_vec();
        too_long_key.extend_from_slice(&[b'k'; server::MAX_KEY + 1]);
        too_long_key.push(b'\n');
        for (line, reason) in [
            (&b"\n"[..], "empty request"),
            (b"get steady\n", "unknown command"),
            (b"GET\n", "missing key"),
            (b"GET \n", "bad key"),
            (b"GET a b\n", "bad key"),
            (b"SET steady\n", "missing value"),
            (b"SET steady \n", "missing value"),
            (b"SET  steady 1\n", "bad key"),
            (b"SET k\x01ey 1\n", "bad key"),
            (b"SET key va\x00lue\n", "bad value"),
            (b"\xff\xfe\xfd\n", "unknown command"),
            (&too_long_key, "bad key"),
        ] {
            assert_eq!(
                ask(&mut c, line),
                format!("ERROR {reason}"),
                "{backend}: {}",
                load::show(line)
            );
        }
        // Garbage bytes: every line of it gets one ERROR reply.
        let mut x = 0x2545_f491u32;
        let mut garbage = Vec::new();
        for _ in 0..50 {
            for _ in 0..(x % 300) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let byte = (x >> 8) as u8;
                garbage.push(if byte == b'\n' { b'?' } else { byte });
            }
            x = x.wrapping_mul(2_654_435_761).wrapping_add(1);
            garbage.push(b'\n');
        }
        let mut reply = Vec::new();
        c.exchange(&garbage, &mut reply).unwrap();
        for i in 0..50 {
            if i > 0 {
                c.read_line(&mut reply).unwrap();
            }
            assert!(
                reply.starts_with(b"ERROR "),
                "{backend}: {}",
                load::show(&reply)
            );
        }
        assert_eq!(ask(&mut c, b"GET steady\n"), "VALUE 1");

        // An overlong line is answered with an error, then the server closes (the issue allows
        // either; this server always sends the error first).
        let mut long = TcpStream::connect(addr).unwrap();
        let mut line = vec![b'a'; 3 * server::MAX_LINE];
        line.push(b'\n');
        long.write_all(&line).unwrap();
        let got = read_to_close(&mut long);
        assert_eq!(
            got,
            b"ERROR line too long\n",
            "{backend}: {}",
            load::show(&got)
        );
        // ... also one that never ends: the server does not wait for its newline.
        let mut endless = TcpStream::connect(addr).unwrap();
        endless.write_all(&[b'S'; server::MAX_LINE + 1]).unwrap();
        let got = read_to_close(&mut endless);
        assert_eq!(
            got,
            b"ERROR line too long\n",
            "{backend}: {}",
            load::show(&got)
        );

        // Clients that leave mid-request, or before their reply is written.
        for partial in [&b"SET half"[..], b"GET steady\nSET x", b"GET steady\n"] {
            let mut gone = TcpStream::connect(addr).unwrap();
            gone.write_all(partial).unwrap();
            gone.shutdown(Shutdown::Write).unwrap();
            drop(gone);
        }
        let mut gone = TcpStream::connect(addr).unwrap();
        gone.write_all(b"SET half").unwrap();
        drop(gone);

        // The others are still served, and a fresh client too.
        assert_eq!(ask(&mut bystander, b"GET steady\n"), "VALUE 1");
        assert_eq!(ask(&mut c, b"GET half\n"), "NOT_FOUND");
        let mut fresh = Connection::open(addr).unwrap();
        assert_eq!(ask(&mut fresh, b"GET steady\n"), "VALUE 1");
        let config = load::Config::new(addr, 2, Duration::from_secs(30), 200);
        let report = load::run(&config).unwrap();
        assert_eq!(report.errors, 0, "{backend}: {:?}", report.first_errors);
        assert_eq!(report.ops, 200);

        // Shutdown with connections still open closes them and joins their readers.
        stop(server, 2 + 1 + 10);
        let mut reply = Vec::new();
        assert!(bystander.exchange(b"GET steady\n", &mut reply).is_err());
    }
}

#[test]
fn parser_accepts_the_protocol_and_nothing_else() {
    assert_eq!(server::parse(b"GET k"), Ok(Request::Get(b"k".to_vec())));
    assert_eq!(server::parse(b"DEL k\r"), Ok(Request::Del(b"k".to_vec())));
    assert_eq!(
        server::parse(b"SET k a b  c"),
        Ok(Request::Set(b"k".to_vec(), b"a b  c".to_vec()))
    );
    assert_eq!(server::parse(b"SET k v\r\r"), Err("bad value"));
    assert_eq!(server::parse(b"GET k "), Err("bad key"));
    assert_eq!(server::parse(b"PUT k v"), Err("unknown command"));
    assert_eq!(server::parse(b" GET k"), Err("unknown command"));
}

#[test]
fn server_and_load_generator_refuse_non_loopback_addresses() {
    let outside: SocketAddr = "192.0.2.1:7878".parse().unwrap();
    let err = Server::start(outside, Backend::Futexkit, 1).err().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    let all: SocketAddr = "0.0.0.0:7878".parse().unwrap();
    assert!(Server::start(all, Backend::Std, 1).is_err());
    let config = load::Config::new(outside, 1, Duration::from_millis(1), 1);
    assert!(load::run(&config).is_err());
    assert!(load::loopback_addr("192.0.2.1:80").is_err());
    assert!(load::loopback_addr("example.com:80").is_err());
    assert!(load::loopback_addr("[::1]:80").is_ok());
    assert!(load::loopback_addr("localhost:80").is_ok());
}

#[test]
fn every_backend_name_parses_back() {
    for backend in Backend::ALL.into_iter().chain(Backend::SPLIT) {
        assert_eq!(backend.name().parse::<Backend>(), Ok(backend));
    }
    let err = "futex".parse::<Backend>().unwrap_err();
    assert!(err.contains("std+futexkit_rwlock"), "{err}");
}
