//! The completion token of asynchronous work: [`Pending`].

use std::ffi::c_void;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};

use crate::error::check;
use crate::event::Event;
use crate::graveyard::sweep;
use crate::one_or_many::OneOrMany;
use crate::point::Point;
use crate::stream::Stream;
use crate::{Device, Error, Result};

/// The finishing step of a [`Pending`], run on the host once the device work has completed.
type Finish<'a, T> = Box<dyn FnOnce() -> Result<T> + Send + 'a>;

/// Device work that is still running, and what to do on the host once it has finished.
///
/// Asynchronous kernel wrappers return a `Pending`; it holds one event per stream the work was
/// enqueued on, plus a finishing step that runs on the host after those events have completed
/// (typically: copy results from runtime-owned pinned staging memory into the caller's
/// [`crate::HostViewMut`]s and build the return value). `'a` is the lifetime of the host data
/// that the finishing step writes.
///
/// - [`Pending::wait`] blocks until the work is done and returns the result;
/// - `.await` does the same without blocking a thread (the future is woken by a host callback
///   that the stream runs after the work; the callback never calls the runtime);
/// - [`Pending::then`] makes another stream wait for the work without blocking the host.
///
/// All of this works the same for work on the CPU device (run by the CPU runtime's stream
/// workers); only [`Pending::then`] and [`Pending::event`] need every event and the stream to
/// be of one backend.
///
/// # Safety model
///
/// Memory safety never depends on the `Pending` being waited for or dropped: the device only
/// ever writes runtime-owned memory (device buffers and pinned staging buffers, which track
/// their accesses and free themselves only after them), never the caller's borrowed host data.
/// Dropping a `Pending` (or a future made from it, even mid-poll) or `mem::forget`ting it only
/// skips the finishing step, so the caller's outputs are not written; staging memory is freed
/// once the device is done with it (or leaked, if forgotten). Dropping never blocks.
#[must_use = "device work is still running; call `.wait()` or `.await` to get its results"]
pub struct Pending<'a, T> {
    /// Shared with the buffers the work accessed (one point per stream marks the end of a
    /// kernel call for both); recorded lazily, when this `Pending` (or a buffer) needs them.
    points: OneOrMany<Arc<Point>>,
    /// The events of `points`, once [`Pending::events`] asked for them.
    events: OnceLock<OneOrMany<Arc<Event>>>,
    finish: Finish<'a, T>,
}

impl<'a, T> Pending<'a, T> {
    /// The building block for generated wrappers: the work is complete when all of `events`
    /// have completed, after which `finish` runs on the host (once, inside [`Pending::wait`]
    /// or the future) and produces the result.
    ///
    /// This is safe because `finish` is ordinary safe code: it can only touch memory it owns or
    /// borrows. Data the device writes must reach it through runtime-owned memory that tracks
    /// its accesses (e.g. a [`crate::PinnedHostBuffer`] that `finish` owns and reads).
    pub fn from_parts(events: Vec<Event>, finish: impl FnOnce() -> Result<T> + Send + 'a) -> Self {
        Self::from_points(events.into_iter().map(Point::recorded).collect(), finish)
    }

    /// [`Pending::from_parts`] with points that the runtime also keeps elsewhere (e.g. as the
    /// last accesses of the buffers a kernel call used).
    pub(crate) fn from_points(
        points: OneOrMany<Arc<Point>>,
        finish: impl FnOnce() -> Result<T> + Send + 'a,
    ) -> Self {
        Pending { points, events: OnceLock::new(), finish: Box::new(finish) }
    }

    /// Records an event at the current end of each of `streams`, then behaves like
    /// [`Pending::from_parts`] with those events.
    pub fn after(
        streams: &[&Stream],
        finish: impl FnOnce() -> Result<T> + Send + 'a,
    ) -> Result<Self> {
        let points = streams
            .iter()
            .map(|stream| stream.point_now().map(|recorded| recorded.point))
            .collect::<Result<OneOrMany<_>>>()?;
        Ok(Self::from_points(points, finish))
    }

    /// A `Pending` that is already complete and yields `value`.
    pub fn ready(value: T) -> Self
    where
        T: Send + 'a,
    {
        Self::from_parts(Vec::new(), move || Ok(value))
    }

    /// Blocks until the device work has completed, then runs the finishing step and returns
    /// its result. On a device error the finishing step does not run.
    pub fn wait(self) -> Result<T> {
        for point in self.points.as_slice() {
            point.event()?.synchronize()?;
        }
        let result = (self.finish)();
        sweep();
        result
    }

    /// `true` when the device work has completed (so [`Pending::wait`] will not block on the
    /// device); does not block.
    pub fn is_complete(&self) -> Result<bool> {
        for point in self.points.as_slice() {
            if !point.event()?.query()? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The events that mark the end of the work, one per stream it used. They are shared with
    /// the runtime's access tracking, hence behind `Arc` (and never re-recorded). The runtime
    /// records them lazily: the first call records those not recorded yet (at the current end
    /// of their streams, which the work's end still is), hence the `Result`.
    pub fn events(&self) -> Result<&[Arc<Event>]> {
        if let Some(events) = self.events.get() {
            return Ok(events.as_slice());
        }
        let events = self
            .points
            .as_slice()
            .iter()
            .map(|point| point.event().map(Arc::clone))
            .collect::<Result<OneOrMany<_>>>()?;
        Ok(self.events.get_or_init(|| events).as_slice())
    }

    /// A new event that completes when all of the work has completed (recorded on a scratch
    /// stream that waits for every event; the host does not block).
    ///
    /// For work of both backends (a [`Pending::join`] of CPU and CUDA work) this fails with
    /// [`Error::DeviceMismatch`]; [`Pending::wait`] works for it.
    pub fn event(&self) -> Result<Event> {
        let device = match self.events()?.first() {
            Some(event) => event.device(),
            None => Device::default_device()?,
        };
        let scratch = Stream::create(device)?;
        self.then(&scratch)?;
        scratch.record_untimed_event()
    }

    /// Makes all work enqueued on `stream` from now on wait until this work has completed,
    /// without blocking the host.
    ///
    /// [`Error::DeviceMismatch`] when some of the work is of the other backend than `stream`
    /// (CPU work cannot be waited for by a CUDA stream, nor the reverse); the host can wait
    /// for it with [`Pending::wait`] instead.
    pub fn then(&self, stream: &Stream) -> Result<()> {
        self.points.as_slice().iter().try_for_each(|point| stream.wait_event(point.event()?))
    }

    /// Transforms the result once it is available.
    pub fn map<U>(self, transform: impl FnOnce(T) -> Result<U> + Send + 'a) -> Pending<'a, U>
    where
        T: 'a,
    {
        let finish = self.finish;
        Pending {
            points: self.points,
            events: OnceLock::new(),
            finish: Box::new(move || transform(finish()?)),
        }
    }

    /// Combines two pieces of work: complete when both are, yielding both results.
    pub fn join<U>(self, other: Pending<'a, U>) -> Pending<'a, (T, U)>
    where
        T: 'a,
        U: 'a,
    {
        let mut points = self.points;
        points.extend(other.points);
        let (first, second) = (self.finish, other.finish);
        Pending {
            points,
            events: OnceLock::new(),
            finish: Box::new(move || Ok((first()?, second()?))),
        }
    }
}

impl<T> fmt::Debug for Pending<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending").field("points", &self.points).finish_non_exhaustive()
    }
}

impl<'a, T> IntoFuture for Pending<'a, T> {
    type Output = Result<T>;
    type IntoFuture = PendingFuture<'a, T>;

    fn into_future(self) -> PendingFuture<'a, T> {
        PendingFuture { pending: Some(self), notification: None }
    }
}

/// State shared between a [`PendingFuture`] and the host callback that completes it.
struct Notification {
    state: Mutex<NotificationState>,
}

struct NotificationState {
    /// Set by the callback once every event of the work has completed.
    done: bool,
    /// The waker of the most recent poll.
    waker: Option<Waker>,
}

/// The host function enqueued with `cudaLaunchHostFunc` (of either backend). It must not call
/// the runtime, and it does not: it sets a flag and wakes the task.
unsafe extern "C" fn notify_completion(data: *mut c_void) {
    // SAFETY: `data` is the pointer `Arc::into_raw` produced in `PendingFuture::register`,
    // which handed one strong count to this callback; the runtime (CUDA or the CPU runtime)
    // runs the callback at most once, so the count is taken back exactly once (or leaked, if
    // the callback never runs).
    let notification = unsafe { Arc::from_raw(data.cast_const().cast::<Notification>()) };
    // A panic must not unwind into the runtime (C or C++ code); a panicking waker is the executor's bug.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let waker = {
            let mut state = notification.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.done = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }));
}

/// The future of a [`Pending`] (`pending.await`).
///
/// The first poll that finds the work unfinished enqueues a host callback behind the work on
/// a scratch stream; the callback wakes the task. The callback owns its share of the state, so
/// dropping the future at any point is safe. Executors must not poll the future from inside
/// `Waker::wake` (the callback's thread must not call the runtime, and polling may).
#[must_use = "futures do nothing unless polled"]
pub struct PendingFuture<'a, T> {
    /// `None` once the result was returned.
    pending: Option<Pending<'a, T>>,
    /// Present once the host callback has been enqueued.
    notification: Option<Arc<Notification>>,
}

impl<T> fmt::Debug for PendingFuture<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingFuture")
            .field("pending", &self.pending)
            .field("registered", &self.notification.is_some())
            .finish()
    }
}

impl<T> PendingFuture<'_, T> {
    /// Enqueues the completion callback behind all events of the work.
    fn register(events: &[Arc<Event>], waker: &Waker) -> Result<Arc<Notification>> {
        let device = match events.first() {
            Some(event) => event.device(),
            None => Device::default_device()?,
        };
        // A scratch stream per future: waiting on the work there delays nothing else.
        let scratch = Stream::create(device)?;
        for event in events {
            scratch.wait_event(event)?;
        }
        let notification = Arc::new(Notification {
            state: Mutex::new(NotificationState { done: false, waker: Some(waker.clone()) }),
        });
        let data = Arc::into_raw(Arc::clone(&notification)).cast_mut().cast::<c_void>();
        let _guard = scratch.bind_device()?;
        let api = device.api();
        // SAFETY: the scratch stream is a valid stream of `api`'s runtime; `notify_completion`
        // matches `cudaHostFn_t` and never calls the runtime; `data` carries a strong count of
        // the Arc that the callback takes back. Destroying the scratch stream afterwards lets
        // the enqueued work (and the callback) run to completion.
        let status =
            unsafe { (api.launch_host_func)(scratch.as_raw(), Some(notify_completion), data) };
        if let Err(error) = check(api, status, "cudaLaunchHostFunc") {
            // SAFETY: the callback was not enqueued, so its strong count is still ours to
            // release; `data` came from `Arc::into_raw` above.
            drop(unsafe { Arc::from_raw(data.cast_const().cast::<Notification>()) });
            return Err(error);
        }
        Ok(notification)
    }
}

impl<T> PendingFuture<'_, T> {
    /// Whether the work of `pending` has completed; registers the callback (first time) or
    /// the current waker (later polls) when it has not.
    fn poll_completion(&mut self, pending: &Pending<'_, T>, waker: &Waker) -> Result<bool> {
        let Some(notification) = &self.notification else {
            if pending.is_complete()? {
                return Ok(true);
            }
            self.notification = Some(Self::register(pending.events()?, waker)?);
            return Ok(false);
        };
        {
            let mut state = notification.state.lock().unwrap_or_else(PoisonError::into_inner);
            if state.done {
                return Ok(true);
            }
            state.waker = Some(waker.clone());
        }
        // Surfaces device errors, after which the callback may never run.
        pending.is_complete()
    }
}

impl<T> Future for PendingFuture<'_, T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T>> {
        // All fields are Unpin, so the future is Unpin.
        let this = self.get_mut();
        let Some(pending) = this.pending.take() else {
            return Poll::Ready(Err(Error::InvalidArgument(
                "a Pending's future was polled after it completed".into(),
            )));
        };
        match this.poll_completion(&pending, cx.waker()) {
            Ok(true) => {
                let result = (pending.finish)();
                sweep();
                Poll::Ready(result)
            }
            Ok(false) => {
                this.pending = Some(pending);
                Poll::Pending
            }
            Err(error) => Poll::Ready(Err(error)),
        }
    }
}
