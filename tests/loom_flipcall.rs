//! loom models of FlipCall's turn protocol: a client and a server over an in-process window,
//! with no lost hand-off (loom reports a deadlock), the data written before a hand-off seen after
//! it, and shutdown racing a call (every blocked call returns, with `Shutdown` or its reply);
//! the same with directed hand-offs (the server sleeping in its intercepted call, the client on
//! the listener, both emulated by the model-checker seam; a lost hand-off there shows as a
//! client polling its listener in slices for ever, which loom reports as "exceeded maximum
//! number of branches"). A directed server must run on the thread that opted in, so in those
//! models the model's main thread is the server.
#![cfg(loom)]

use futexkit::flipcall::{self, Error};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(f);
}

#[test]
fn calls_carry_data_both_ways() {
    model(|| {
        let (mut client, mut server) = flipcall::pair(4).unwrap();
        let server = loom::thread::spawn(move || {
            let len = server.recv_first().unwrap();
            assert_eq!((len, server.data()[0]), (1, 10));
            server.data_mut()[0] = 11;
            let len = server.send_recv(1).unwrap();
            assert_eq!((len, server.data()[0]), (1, 12));
            server.data_mut()[0] = 13;
            server.send_last(1).unwrap();
            server
        });
        client.connect().unwrap();
        client.data_mut()[0] = 10;
        assert_eq!(client.send_recv(1).unwrap(), 1);
        assert_eq!(client.data()[0], 11);
        client.data_mut()[0] = 12;
        assert_eq!(client.send_recv(1).unwrap(), 1);
        assert_eq!(client.data()[0], 13);
        let _server = server.join().unwrap();
    });
}

#[test]
fn shutdown_races_a_call() {
    model(|| {
        let (mut client, mut server) = flipcall::pair(4).unwrap();
        let stop = client.shutdown_handle();
        let server = loom::thread::spawn(move || match server.recv_first() {
            Ok(len) => {
                assert_eq!(len, 0);
                match server.send_recv(0) {
                    Ok(_) | Err(Error::Shutdown) => {}
                    Err(err) => panic!("server: {err}"),
                }
            }
            Err(Error::Shutdown) => {}
            Err(err) => panic!("server: {err}"),
        });
        let stopper = loom::thread::spawn(move || stop.shutdown());
        match client.connect() {
            Ok(()) => match client.send_recv(0) {
                Ok(0) | Err(Error::Shutdown) => {}
                other => panic!("client: {other:?}"),
            },
            Err(Error::Shutdown) => {}
            Err(err) => panic!("client: {err}"),
        }
        stopper.join().unwrap();
        server.join().unwrap();
    });
}

#[test]
fn dropping_the_client_releases_a_waiting_server() {
    model(|| {
        let (mut client, mut server) = flipcall::pair(0).unwrap();
        let server = loom::thread::spawn(move || {
            let mut calls = 0;
            let mut next = server.recv_first();
            while let Ok(_) = next {
                calls += 1;
                next = server.send_recv(0);
            }
            assert!(matches!(next, Err(Error::Shutdown)));
            calls
        });
        client.connect().unwrap();
        client.send_recv(0).unwrap();
        drop(client);
        assert_eq!(server.join().unwrap(), 1);
    });
}

/// A directed channel: the server opted in on this (the model's main) thread, the client took
/// the listener.
fn directed_pair(data_cap: usize) -> (flipcall::Endpoint, flipcall::Endpoint) {
    let (mut client, mut server) = flipcall::pair(data_cap).unwrap();
    let wakeups = server.direct_wakeups().unwrap();
    client.accept_directed_wakeups(wakeups).unwrap();
    (client, server)
}

#[test]
fn directed_calls_carry_data_both_ways() {
    model(|| {
        let (mut client, mut server) = directed_pair(4);
        let client = loom::thread::spawn(move || {
            client.connect().unwrap();
            client.data_mut()[0] = 10;
            assert_eq!(client.send_recv(1).unwrap(), 1);
            assert_eq!(client.data()[0], 11);
            client.data_mut()[0] = 12;
            assert_eq!(client.send_recv(1).unwrap(), 1);
            assert_eq!(client.data()[0], 13);
            // Dropping the client closes the listener.
        });
        let len = server.recv_first().unwrap();
        assert_eq!((len, server.data()[0]), (1, 10));
        server.data_mut()[0] = 11;
        let len = server.send_recv(1).unwrap();
        assert_eq!((len, server.data()[0]), (1, 12));
        server.data_mut()[0] = 13;
        // If the client sleeps, this wake is the server's own sleep, which the client's drop
        // (closing the listener) ends.
        server.send_last(1).unwrap();
        assert!(matches!(server.recv(), Err(Error::Shutdown)));
        client.join().unwrap();
    });
}

#[test]
fn directed_shutdown_races_a_call() {
    model(|| {
        let (mut client, mut server) = directed_pair(4);
        let stop = server.shutdown_handle();
        let client = loom::thread::spawn(move || {
            match client.connect() {
                Ok(()) => match client.send_recv(0) {
                    Ok(0) | Err(Error::Shutdown) => {}
                    other => panic!("client: {other:?}"),
                },
                Err(Error::Shutdown) => {}
                Err(err) => panic!("client: {err}"),
            }
            // Dropping the client closes the listener: a server asleep in its call returns.
        });
        let stopper = loom::thread::spawn(move || stop.shutdown());
        match server.recv_first() {
            Ok(len) => {
                assert_eq!(len, 0);
                match server.send_recv(0) {
                    Ok(_) | Err(Error::Shutdown) => {}
                    Err(err) => panic!("server: {err}"),
                }
            }
            Err(Error::Shutdown) => {}
            Err(err) => panic!("server: {err}"),
        }
        stopper.join().unwrap();
        client.join().unwrap();
    });
}
