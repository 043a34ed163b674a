//! loom models of FlipCall's turn protocol: a client and a server over an in-process window,
//! with no lost hand-off (loom reports a deadlock), the data written before a hand-off seen after
//! it, and shutdown racing a call (every blocked call returns, with `Shutdown` or its reply).
#![cfg(futexkit_loom)]

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
            while next.is_ok() {
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
