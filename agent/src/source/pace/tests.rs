//! The polling schedule on tokio's paused clock: a fake poll loop records when each poll starts.

use rand::SeedableRng;

use super::*;

const INTERVAL: Duration = Duration::from_secs(30);

const UNCHANGED: PollOutcome = PollOutcome { failed: false, changed: false, long_poll: false };
const CHANGED: PollOutcome = PollOutcome { failed: false, changed: true, long_poll: false };
const FAILED: PollOutcome = PollOutcome { failed: true, changed: false, long_poll: false };

fn pacer(interval: Duration, moved: Option<&EngineMoved>) -> Pacer {
    Pacer::new(interval, moved.map(EngineMoved::listen), StdRng::seed_from_u64(7))
}

/// Runs a poll loop (each poll instantaneous, its outcome `outcome(n)` for the n-th) for `run`
/// of paused time; raises `moved` at each of `raises` (seconds from the start). Returns when
/// each poll started, in seconds from the start.
async fn poll_times(
    mut pacer: Pacer,
    run: Duration,
    moved: Option<EngineMoved>,
    raises: Vec<f64>,
    outcome: impl Fn(usize) -> PollOutcome,
) -> Vec<f64> {
    let start = Instant::now();
    let shutdown = CancellationToken::new();
    tokio::spawn({
        let shutdown = shutdown.clone();
        async move {
            for at in raises {
                tokio::time::sleep_until(start + Duration::from_secs_f64(at)).await;
                if let Some(moved) = &moved {
                    moved.raise();
                }
            }
            tokio::time::sleep_until(start + run).await;
            shutdown.cancel();
        }
    });
    let mut times = Vec::new();
    loop {
        let started = Instant::now();
        times.push((started - start).as_secs_f64());
        if !pacer.pause(outcome(times.len() - 1), started, &shutdown).await {
            return times;
        }
    }
}

fn gaps(times: &[f64]) -> Vec<f64> {
    times.windows(2).map(|pair| pair[1] - pair[0]).collect()
}

/// Each of `gaps` is its `bases` entry (seconds) ±10%, and there are as many.
fn assert_steps(gaps: &[f64], bases: &[f64]) {
    assert_eq!(gaps.len(), bases.len(), "gaps {gaps:?}, expected about {bases:?}");
    for (gap, base) in gaps.iter().zip(bases) {
        assert!((base * 0.9 - 1e-6..=base * 1.1 + 1e-6).contains(gap), "gap {gap} is not {base} ±10%: {gaps:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn after_a_delivery_the_source_is_polled_after_one_two_four_seconds_then_the_interval() {
    let moved = EngineMoved::new();
    // A raise 10 s into the first 30 s pause; the 8th poll after it would be at 118.9 s at the
    // soonest, the 7th at 110.1 s at the latest.
    let times =
        poll_times(pacer(INTERVAL, Some(&moved)), Duration::from_secs(115), Some(moved), vec![10.0], |_| UNCHANGED)
            .await;
    let mut after_raise = vec![10.0];
    after_raise.extend(&times[1..]);
    assert_steps(&gaps(&after_raise), &[1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]);
}

#[tokio::test(start_paused = true)]
async fn a_new_document_restarts_the_sequence() {
    let moved = EngineMoved::new();
    // The 1st poll brings a document, the 4th another; no raise at all.
    let changes = |poll: usize| if poll == 0 || poll == 3 { CHANGED } else { UNCHANGED };
    let times = poll_times(pacer(INTERVAL, Some(&moved)), Duration::from_secs(100), Some(moved), vec![], changes).await;
    // 1 + 2 + 4, then 1 + 2 + 4 + 8 + 16 + 30 (at most 7.7 + 67.1 = 74.8 s), then 30 (at least 84.2 s).
    let steps = gaps(&times);
    assert_steps(&steps[..9], &[1.0, 2.0, 4.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0]);
    assert!(steps[9..].iter().all(|gap| *gap >= 27.0), "then the interval: {steps:?}");
}

#[tokio::test(start_paused = true)]
async fn a_storm_of_signals_polls_at_most_once_a_second_and_never_starves_the_source() {
    let moved = EngineMoved::new();
    let raises = (0..200).map(|tenth| f64::from(tenth) / 10.0).collect();
    let times =
        poll_times(pacer(INTERVAL, Some(&moved)), Duration::from_secs(20), Some(moved), raises, |_| UNCHANGED).await;
    // A raise up to 0.1 s after a poll asks for the next one ~1 s (±10%) later: 1.2 s at most.
    let steps = gaps(&times);
    assert!(steps.iter().all(|gap| (1.0 - 1e-6..=1.2 + 1e-6).contains(gap)), "one poll a second at most: {steps:?}");
    assert!(times.len() >= 17, "each raise brings the next poll forward, never back: {times:?}");
}

#[tokio::test(start_paused = true)]
async fn a_short_interval_is_not_made_faster() {
    let moved = EngineMoved::new();
    let raises = (0..100).map(|tenth| f64::from(tenth) / 10.0 + 0.05).collect();
    let one_second = Duration::from_secs(1);
    let times =
        poll_times(pacer(one_second, Some(&moved)), Duration::from_secs(10), Some(moved), raises, |_| CHANGED).await;
    assert!(gaps(&times).iter().all(|gap| *gap >= 0.9 - 1e-6), "{times:?}");
    assert!(gaps(&times).iter().all(|gap| *gap <= 1.1 + 1e-6), "{times:?}");
}

#[tokio::test(start_paused = true)]
async fn fast_follow_off_keeps_the_plain_schedule() {
    // Without a listener (`[agent] fast_follow = false`) neither a raise nor a change counts.
    let moved = EngineMoved::new();
    let times =
        poll_times(pacer(INTERVAL, None), Duration::from_secs(100), Some(moved), vec![5.0, 40.0], |_| CHANGED).await;
    assert_steps(&gaps(&times), &[30.0, 30.0, 30.0]);
}

#[tokio::test(start_paused = true)]
async fn a_raise_while_the_source_fails_is_not_answered_after_it_recovers() {
    let moved = EngineMoved::new();
    // The 1st poll fails (backoff 1 s ±20%), a raise comes during that backoff; the 2nd poll
    // succeeds without a change, so the interval follows.
    let outcome = |poll: usize| if poll == 0 { FAILED } else { UNCHANGED };
    let times =
        poll_times(pacer(INTERVAL, Some(&moved)), Duration::from_secs(40), Some(moved), vec![0.5], outcome).await;
    let steps = gaps(&times);
    assert_eq!(steps.len(), 2, "{times:?}");
    assert!((0.8..=1.2).contains(&steps[0]), "the error backoff: {steps:?}");
    assert!((27.0..=33.0).contains(&steps[1]), "then the interval, the stale raise ignored: {steps:?}");
}

#[tokio::test(start_paused = true)]
async fn plain_polls_are_jittered_by_ten_percent() {
    let times = poll_times(pacer(INTERVAL, None), Duration::from_secs(3000), None, vec![], |_| UNCHANGED).await;
    let steps = gaps(&times);
    assert!(steps.len() >= 90, "{}", steps.len());
    assert!(steps.iter().all(|gap| (27.0 - 1e-6..=33.0 + 1e-6).contains(gap)), "{steps:?}");
    assert!(steps.iter().any(|gap| (gap - steps[0]).abs() > 0.01), "delays vary: {steps:?}");
}

#[tokio::test(start_paused = true)]
async fn long_poll_goes_straight_on_but_never_spins_and_ignores_raises() {
    let moved = EngineMoved::new();
    // Answers without a change: a second between requests (each answer takes no time here).
    let unchanged = PollOutcome { long_poll: true, ..UNCHANGED };
    let raises = vec![0.5, 1.5, 2.5];
    let times =
        poll_times(pacer(INTERVAL, Some(&moved)), Duration::from_millis(3500), Some(moved), raises, |_| unchanged)
            .await;
    assert_eq!(times, [0.0, 1.0, 2.0, 3.0]);
    // A change is asked about again at once.
    let changed = PollOutcome { long_poll: true, ..CHANGED };
    let mut pacer = pacer(INTERVAL, None);
    let started = Instant::now();
    assert!(pacer.pause(changed, started, &CancellationToken::new()).await);
    assert_eq!(Instant::now(), started);
}
