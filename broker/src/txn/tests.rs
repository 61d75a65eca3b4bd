use super::*;
use crate::log::now_millis;

fn commit(topic: &str, partition: i32, offset: i64) -> OffsetCommit {
    OffsetCommit {
        topic: topic.into(),
        partition,
        offset,
        leader_epoch: -1,
        metadata: Some("m e t a".into()),
    }
}

#[tokio::test]
async fn a_transaction_goes_from_empty_to_ongoing_to_complete() {
    let ids = ProducerIds::default();
    let coordinator = TxnCoordinator::default();
    assert_eq!(
        coordinator.init("pay", 0, 900_000, &ids).await.unwrap_err(),
        ResponseError::InvalidTransactionTimeout
    );
    assert_eq!(
        coordinator
            .init("pay", i32::MAX, 900_000, &ids)
            .await
            .unwrap_err(),
        ResponseError::InvalidTransactionTimeout
    );
    let (id, epoch, none) = coordinator
        .init("pay", 60_000, 900_000, &ids)
        .await
        .unwrap();
    assert_eq!((id, epoch, none.is_none()), (0, 0, true));
    // Nothing to end yet.
    assert_eq!(
        coordinator.end("pay", id, 0, true).await,
        Err(ResponseError::InvalidTxnState)
    );
    let partitions = [("orders".to_string(), 0), ("orders".to_string(), 1)];
    coordinator
        .add_partitions("pay", id, 0, &partitions, 1_000)
        .await
        .unwrap();
    assert!(coordinator.accepts(id, 0, "orders", 1));
    assert!(!coordinator.accepts(id, 0, "orders", 2));
    // Offsets need their group added first.
    assert_eq!(
        coordinator
            .commit_offsets("pay", id, 0, "g", vec![commit("in", 0, 5)])
            .await,
        Err(ResponseError::InvalidTxnState)
    );
    coordinator
        .add_offsets("pay", id, 0, "g", 1_000)
        .await
        .unwrap();
    coordinator
        .commit_offsets("pay", id, 0, "g", vec![commit("in", 0, 5)])
        .await
        .unwrap();
    coordinator
        .commit_offsets("pay", id, 0, "g", vec![commit("in", 0, 7)])
        .await
        .unwrap();
    let ending = coordinator.end("pay", id, 0, true).await.unwrap().unwrap();
    assert_eq!(ending.marker, Marker::Commit);
    assert_eq!(ending.partitions, partitions.to_vec());
    assert_eq!(
        ending.offsets,
        vec![("g".to_string(), vec![commit("in", 0, 7)])]
    );
    assert_eq!(
        coordinator.get("pay").unwrap().state,
        TxnState::PrepareCommit
    );
    assert_eq!(
        coordinator
            .add_partitions("pay", id, 0, &partitions, 2_000)
            .await,
        Err(ResponseError::ConcurrentTransactions)
    );
    coordinator.completed(&ending).await.unwrap();
    assert_eq!(
        coordinator.get("pay").unwrap().state,
        TxnState::CompleteCommit
    );
    // A retried commit is answered as done; an abort now is not.
    assert_eq!(coordinator.end("pay", id, 0, true).await, Ok(None));
    assert_eq!(
        coordinator.end("pay", id, 0, false).await,
        Err(ResponseError::InvalidTxnState)
    );
    assert!(!coordinator.accepts(id, 0, "orders", 0));
}

#[tokio::test]
async fn a_new_instance_fences_the_old_one_and_aborts_its_transaction() {
    let ids = ProducerIds::default();
    let coordinator = TxnCoordinator::default();
    let (id, _, _) = coordinator
        .init("pay", 60_000, 900_000, &ids)
        .await
        .unwrap();
    let partitions = [("orders".to_string(), 0)];
    coordinator
        .add_partitions("pay", id, 0, &partitions, 0)
        .await
        .unwrap();
    let (same, epoch, ending) = coordinator
        .init("pay", 60_000, 900_000, &ids)
        .await
        .unwrap();
    assert_eq!((same, epoch), (id, 1));
    let ending = ending.expect("the open transaction is aborted");
    assert_eq!((ending.marker, ending.epoch), (Marker::Abort, 1));
    assert_eq!(
        coordinator
            .add_partitions("pay", id, 0, &partitions, 0)
            .await,
        Err(ResponseError::ProducerFenced)
    );
    assert_eq!(
        coordinator.end("pay", id, 0, true).await,
        Err(ResponseError::ProducerFenced)
    );
    assert!(ids.is_fenced(id, 0));
    assert_eq!(
        coordinator.end("pay", id + 1, 1, true).await,
        Err(ResponseError::InvalidProducerIdMapping)
    );
    assert_eq!(
        coordinator.end("nobody", id, 1, true).await,
        Err(ResponseError::InvalidProducerIdMapping)
    );
}

#[tokio::test]
async fn a_transaction_past_its_timeout_is_aborted_with_a_new_epoch() {
    let ids = ProducerIds::default();
    let coordinator = TxnCoordinator::default();
    let (id, _, _) = coordinator
        .init("pay", 10_000, 900_000, &ids)
        .await
        .unwrap();
    coordinator
        .add_partitions("pay", id, 0, &[("orders".into(), 0)], 5_000)
        .await
        .unwrap();
    assert!(coordinator.abort_timed_out(15_000, &ids).await.is_empty());
    let endings = coordinator.abort_timed_out(15_001, &ids).await;
    assert_eq!(endings.len(), 1);
    assert_eq!((endings[0].marker, endings[0].epoch), (Marker::Abort, 1));
    assert!(ids.is_fenced(id, 0));
    coordinator.completed(&endings[0]).await.unwrap();
    assert_eq!(
        coordinator.get("pay").unwrap().state,
        TxnState::CompleteAbort
    );
    assert_eq!(
        coordinator.end("pay", id, 0, true).await,
        Err(ResponseError::ProducerFenced)
    );
}

#[tokio::test]
async fn the_state_file_round_trips_and_an_unfinished_end_is_handed_back() {
    let dir = std::env::temp_dir().join(format!("txn-store-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ids = ProducerIds::default();
    let (coordinator, unfinished) = TxnCoordinator::open(&dir, &ids).unwrap();
    assert!(unfinished.is_empty());
    let (id, _, _) = coordinator
        .init("pay 1", 60_000, 900_000, &ids)
        .await
        .unwrap();
    coordinator
        .add_partitions("pay 1", id, 0, &[("orders".into(), 3)], 7)
        .await
        .unwrap();
    coordinator
        .add_offsets("pay 1", id, 0, "group one", 7)
        .await
        .unwrap();
    coordinator
        .commit_offsets("pay 1", id, 0, "group one", vec![commit("in", 2, 9)])
        .await
        .unwrap();
    let (other, _, _) = coordinator
        .init("idle", 1_000, 900_000, &ids)
        .await
        .unwrap();
    let before = coordinator.get("pay 1").unwrap();
    let ending = coordinator
        .end("pay 1", id, 0, true)
        .await
        .unwrap()
        .unwrap();

    let restarted = ProducerIds::default();
    let (again, unfinished) = TxnCoordinator::open(&dir, &restarted).unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].offsets, ending.offsets);
    assert_eq!(unfinished[0].partitions, ending.partitions);
    let recovered = again.get("pay 1").unwrap();
    assert_eq!(recovered.state, TxnState::PrepareCommit);
    assert_eq!(recovered.offsets, before.offsets);
    assert_eq!(again.get("idle").unwrap().producer_id, other);
    // The epochs were handed to the producer ids: the next init fences epoch 0.
    let (_, epoch, _) = again
        .init("idle", 1_000, 900_000, &restarted)
        .await
        .unwrap();
    assert_eq!(epoch, 1);
    assert!(restarted.is_fenced(other, 0));
    // An idle id expires, and stays expired after a restart; the one being ended does not.
    assert_eq!(again.expire(now_millis(), &restarted).await, 1);
    assert!(!restarted.is_fenced(other, 0), "its epoch is forgotten too");
    drop(again);
    let (reopened, unfinished) = TxnCoordinator::open(&dir, &ProducerIds::default()).unwrap();
    assert!(reopened.get("idle").is_none());
    assert_eq!(unfinished.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
