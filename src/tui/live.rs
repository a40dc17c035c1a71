//! The live proxy view: recorder events applied to the session index the inspector shows.

use crate::record::recorder::RecordEvent;
use crate::session::index::SessionSource;
use crate::session::{Body, Chunk, Exchange, Response};

/// Applies one live recorder event (the proxy view): a started exchange appears, its
/// status and chunks grow in place, the ended exchange replaces it. Returns the affected
/// row, if any.
pub fn apply_record(src: &mut SessionSource, ev: &RecordEvent) -> Option<usize> {
    use RecordEvent as R;
    let find = |src: &SessionSource, id: u64| src.row_of(id);
    let with = |src: &mut SessionSource, row: usize, f: &mut dyn FnMut(&mut Exchange)| {
        if let Some(e) = src.live_exchange_mut(row) {
            f(e);
        }
    };
    match ev {
        R::Started {
            id,
            started,
            request,
        } => {
            let ex = Exchange {
                id: *id,
                started: started.clone(),
                request: request.clone(),
                outcome: crate::session::Outcome::Complete,
                ..Default::default()
            };
            Some(src.push_live(ex))
        }
        R::Head {
            id,
            status,
            headers,
            ttfb_us,
        } => {
            let row = find(src, *id)?;
            let sse = headers.iter().any(|(k, v)| {
                k.eq_ignore_ascii_case("content-type") && crate::stream::is_event_stream(v)
            });
            with(src, row, &mut |e| {
                e.response = Some(Response {
                    status: *status,
                    headers: headers.clone(),
                    body: None,
                    chunks: sse.then(Vec::new),
                });
                e.timings.ttfb_us = Some(*ttfb_us);
            });
            Some(row)
        }
        R::Chunk { id, t_us, bytes } => {
            let row = find(src, *id)?;
            with(src, row, &mut |e| {
                let r = e.response.get_or_insert_with(Response::default);
                match &mut r.chunks {
                    Some(c) => c.push(Chunk {
                        t_us: *t_us,
                        data: Body::from_bytes(bytes),
                    }),
                    None => {
                        let mut b = r.body.take().map(|b| b.to_bytes()).unwrap_or_default();
                        b.extend_from_slice(bytes);
                        r.body = Some(Body::from_bytes(&b));
                    }
                }
                e.timings.total_us = Some(*t_us);
            });
            Some(row)
        }
        R::Ended(ex) => Some(src.push_live((**ex).clone())),
        R::Annotated(a) => {
            src.annotations
                .entry(a.exchange())
                .or_default()
                .push(a.clone());
            if matches!(a, crate::session::Annotation::Engine { .. }) {
                // the proxy learnt the engine after the header (issue #12): the live view
                // uses it from now on, as a reader of the file does
                crate::session::read::apply_learnt_engine(&mut src.header, &src.annotations);
            }
            find(src, a.exchange())
        }
        R::Warning(_) => None,
    }
}
