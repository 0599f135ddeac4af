//! loom models of the multi-node quiescence (built only with `--cfg loom`).

use super::Quiescence;
use crate::distributor::ownership::{bucket_of, default_owner, SharedMap, BUCKETS};
use crate::fifo::spsc;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::{model, thread, Arc};

/// A flow's tag whose bucket node 0 owns at the start, and that bucket.
fn flow_of_node_0(nodes: usize) -> (u64, usize) {
    let tag = (0u64..)
        .find(|&t| default_owner(bucket_of(t), nodes) == 0)
        .unwrap();
    (tag, bucket_of(tag))
}

/// The new owner's side of a handover: node 0 moves the flow's bucket to node 1 while
/// node 2 takes a packet of the flow (adopting a newer map at the start of its call,
/// as `NodeDistributor::distribute` does, and routing by its copy). Node 1, which may
/// not have seen the new version yet, reads its bridge from node 2 and, having read a
/// packet, refreshes its copy once more before deciding (`pump_local`): its copy then
/// knows the migration (it holds the packet). Without the second refresh, a packet
/// routed by a newer map than node 1's copy is routed as if node 1 did not own the
/// bucket (before node 0 is done with it), and the model fails; so it does if the
/// version line is raised after the map's publication instead of before.
#[test]
fn a_receiver_knows_the_map_its_sender_routed_by() {
    let (tag, b) = flow_of_node_0(3);
    // Another bucket of node 0, migrated first: node 1 has seen that change and node 2
    // has not, so node 1's copy is ahead of node 2's until node 2 looks (a version
    // line that trailed the map's publication let node 1 miss the next change).
    let other = (0..BUCKETS)
        .find(|&x| x != b && default_owner(x, 3) == 0)
        .unwrap();
    model(move || {
        let map = Arc::new(SharedMap::new(3));
        let (mut tx, mut rx) = spsc::channel::<u64>(1).unwrap(); // node 2 -> 1
        let mut local1 = map.local(1);
        let mut local2 = map.local(2);
        map.start(other, 0, 2).unwrap();
        assert!(map.refresh(&mut local1));
        let map0 = Arc::clone(&map);
        let old = thread::spawn(move || {
            map0.start(b, 0, 1).unwrap();
        });
        let map2 = Arc::clone(&map);
        let sender = thread::spawn(move || {
            map2.refresh(&mut local2);
            if local2.owner(tag) == 1 {
                tx.push(7).unwrap();
            }
        });
        map.refresh(&mut local1);
        if rx.pop().is_some() {
            map.refresh(&mut local1);
            assert!(
                local1.held_here(tag),
                "node 1 would route a packet of a bucket it does not own yet"
            );
        }
        old.join().unwrap();
        sender.join().unwrap();
    });
}

/// The old owner's side: node 2 takes a packet of the flow, routing by its copy of
/// the map (adopting a newer version first), then is dropped (adopting "every
/// version"). Node 0 moves the bucket to node 1; once it sees that node 2 adopted the
/// new version, it reads its bridge from node 2 up to the tail it sees then. Every
/// packet node 2 sent it must be within that count: nothing of the bucket may reach
/// node 0 after it has handed the bucket over.
#[test]
fn the_old_owner_counts_every_packet_sent_by_the_old_map() {
    let (tag, b) = flow_of_node_0(3);
    model(move || {
        let map = Arc::new(SharedMap::new(3));
        let q = Quiescence::new(3);
        let (mut tx, mut rx) = spsc::channel::<u64>(1).unwrap(); // node 2 -> 0
        let mut local2 = map.local(2);
        let (map2, q2) = (Arc::clone(&map), q.share());
        let sender = thread::spawn(move || {
            if map2.refresh(&mut local2) {
                q2.adopt(2, local2.version());
            }
            if local2.owner(tag) == 0 {
                tx.push(7).unwrap();
            }
            q2.adopt(2, u64::MAX);
        });
        let v = map.start(b, 0, 1).unwrap();
        let counted = if q.adopted(2) >= v {
            let target = rx.refresh();
            for _ in 0..target {
                rx.pop().expect("below the tail seen");
            }
            true
        } else {
            false
        };
        sender.join().unwrap();
        if counted {
            assert!(
                rx.pop().is_none(),
                "a packet sent by the old map arrived after the count"
            );
        }
    });
}

/// Node 0 takes one packet for node 1's flows: counts it, pushes it onto the bridge,
/// then flushes. Node 1 flushes from the start and pumps its bridge. Neither flush may
/// return before node 1 has finished the packet.
#[test]
fn no_flush_returns_while_a_packet_crosses_a_bridge() {
    model(|| {
        let q = Quiescence::new(2);
        let q0 = q.share();
        let (mut tx, mut rx) = spsc::channel::<u8>(2).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let done0 = Arc::clone(&done);
        let t = thread::spawn(move || {
            q0.publish(0, 1, 0);
            tx.push(7).unwrap();
            q0.set_flushing(0, true);
            while !q0.idle() {
                thread::yield_now();
            }
            assert!(
                done0.load(Ordering::SeqCst),
                "node 0's flush returned early"
            );
        });
        q.set_flushing(1, true);
        let mut finished = 0;
        loop {
            if rx.pop().is_some() {
                done.store(true, Ordering::SeqCst);
                finished += 1;
                q.publish(1, 0, finished);
            }
            if q.idle() {
                break;
            }
            thread::yield_now();
        }
        assert_eq!(
            finished, 1,
            "node 1's flush returned before the packet came"
        );
        t.join().unwrap();
    });
}
