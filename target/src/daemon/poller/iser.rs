//! The poller's side of an iSER connection (issue 18): receives go to the connection's
//! [`crate::iser::IserConn`], whose actions are run here with the same machinery NVMe/RDMA
//! commands use: pool buffers, RDMA READ of write data, the namespaces' storage, RDMA WRITE of
//! read data ahead of the response on the same queue pair.
//!
//! What differs from NVMe/RDMA: a receive is the iSER header and BHS in the slot's first
//! buffer and the data segment in its second; responses are iSCSI PDUs (a SCSI Response with
//! sense is 96 bytes, sent inline), each SEND signaled; a storage result becomes sense data
//! ([`crate::scsi::sense_for_storage_error`]).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use raidline_cc::netrtt::Dir;
use raidline_fabric::{ConnId, Fabric, Payload, RemoteBuf, SendOp, SendWr, WrId};
use raidline_proto::{Status, StatusCode};
use raidline_scsi::sbc::{Io, WriteSameAction};
use raidline_scsi::sense::Sense;

use super::super::queue::{DataSrc, Queue, Req, Slot, Step, Wr};
use super::{AfterBuf, ControlMsg, Poller};
use crate::io::DataLocation;
use crate::iser::{Action, Task, HEAD_LEN};
use crate::status::StorageError;

/// Largest SEND payload that goes inline (the QP's `max_inline_data`).
const INLINE_MAX: usize = 128;
/// How long a reinstating login waits for its old session's tasks to end (its connection is
/// not ticked meanwhile: no ping goes before the login's last answer).
const REINSTATE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A login that reinstates a session: its final answer waits for the old session to go.
pub(super) struct HeldLogin {
    qpn: u32,
    waits_for: Vec<ConnId>,
    actions: Vec<Action>,
    since: std::time::Instant,
}

impl<F: Fabric> Poller<F> {
    /// A SEND arrived on an iSER queue: its PDU goes to the connection. The receive goes back
    /// at once, unless a write's immediate data lies in it: then the task keeps it until its
    /// data is written (all of it immediate: written from the receive buffer itself, as NVMe's
    /// in-capsule data) or copied to the front of the pool buffer the rest is fetched into.
    pub(super) fn on_iser_recv(&mut self, q: &mut Queue<F>, slot: Slot, len: usize) {
        if self.draining {
            return self.drop_slot(q, slot);
        }
        let Some(mut iq) = q.iser.take() else {
            return self.drop_slot(q, slot);
        };
        {
            let target = iq.conn.session().and_then(|s| s.target_name.as_deref());
            iq.units.refresh(&self.shared.namespaces, target);
        }
        if !iq.units.regained.is_empty() {
            // A namespace enabled again (SPC-5 §5.14: NOT READY TO READY CHANGE): Linux sd
            // retries the command that gets it and revalidates the disk.
            iq.conn.unit_attention(
                &iq.units.regained,
                raidline_scsi::sense::Asc::NOT_READY_TO_READY_CHANGE,
            );
        }
        let mut out = std::mem::take(&mut self.iser_out);
        {
            let head = &slot.cmd[..len.min(HEAD_LEN).min(slot.cmd.len())];
            let body_len = len.saturating_sub(HEAD_LEN);
            let body: &[u8] = match &slot.icd {
                Some(b) => &b[..body_len.min(b.len())],
                None => &[],
            };
            iq.conn.on_recv(head, body, &iq.units, &mut out);
        }
        if out.iter().any(|a| matches!(a, Action::FullFeature { .. })) {
            if let Some(s) = iq.conn.session() {
                self.iser_logged_in(q, s, &mut out);
            }
        }
        q.iser = Some(iq);
        let keep = out
            .iter()
            .any(|a| matches!(a, Action::Task(t) if t.immediate.1 > 0));
        let slot = if keep {
            Some(slot)
        } else {
            self.post_recv(q, slot);
            None
        };
        self.iser_actions(q, out, slot);
    }

    /// A login reached full-feature phase (its answer is in `out`): the session is counted
    /// and listed; one that reinstates a session the target still has closes the old
    /// connection, and its answer is held until the old session is gone.
    fn iser_logged_in(
        &mut self,
        q: &Queue<F>,
        s: &raidline_scsi::iscsi::login::LoginSession,
        out: &mut Vec<Action>,
    ) {
        self.shared
            .data_path
            .iscsi_logins
            .fetch_add(1, Ordering::Relaxed);
        let st = crate::mgmt::IscsiSessionStatus {
            session_type: format!("{:?}", s.session_type),
            initiator: s.initiator_name.clone(),
            target: s.target_name.clone().unwrap_or_default(),
            isid: s.isid.iter().map(|b| format!("{b:02x}")).collect(),
            tsih: s.tsih,
            peer: q.peer.map_or_else(|| "?".into(), |p| p.to_string()),
            poller: self.id as u32,
        };
        tracing::info!("{st}");
        let (old, who) = {
            let mut sessions = super::lock(&self.shared.iscsi_sessions);
            let old: Vec<ConnId> = sessions
                .iter()
                .filter(|(c, o)| **c != q.conn && o.same_session(&st))
                .map(|(c, _)| *c)
                .collect();
            let who = (!old.is_empty()).then(|| (st.initiator.clone(), st.isid.clone()));
            sessions.insert(q.conn, st);
            (old, who)
        };
        if let Some((initiator, isid)) = who {
            // Session reinstatement (RFC 7143 §6.3.5): the initiator logged in again
            // with the ISID of a session the target still has, after losing its
            // connection. The old one is closed, and the new login answered only once
            // the old tasks have ended: a write of the old session must not land
            // after the same initiator's writes on the new one.
            tracing::warn!(
                "iSCSI session reinstatement: {} logged in again with ISID {}; its old connection \
                 is closed first ({} in all)",
                initiator,
                isid,
                old.len()
            );
            for &conn in &old {
                self.shared.tell_control(ControlMsg::CloseConn {
                    conn,
                    reason: "iSCSI session reinstated by a new login".into(),
                });
            }
            let held = std::mem::take(out);
            let since = self.clock();
            self.iser_held.push(HeldLogin {
                qpn: q.qp_num().0,
                waits_for: old,
                actions: held,
                since,
            });
        }
    }

    /// Ticks every iSER connection's keep-alive ([`crate::iser::IserConn::tick`]) about once
    /// a second: pings to silent initiators, and closing those that do not answer; and
    /// answers the reinstating logins whose old sessions are gone.
    pub(super) fn iser_keepalive(&mut self) {
        if self.iser_queues == 0 {
            return;
        }
        let now = self.clock();
        let (zero, next) = self.iser_clock;
        if now < next {
            return;
        }
        self.iser_clock.1 = now + std::time::Duration::from_secs(1);
        if !self.iser_held.is_empty() {
            self.iser_release_logins();
        }
        let qpns: Vec<u32> = self
            .queues
            .iter()
            .filter(|(_, q)| q.iser.is_some() && !q.closing)
            .map(|(k, _)| k)
            .filter(|k| !self.iser_held.iter().any(|h| h.qpn == *k))
            .collect();
        for qpn in qpns {
            let Some(mut q) = self.queues.take(qpn) else {
                continue;
            };
            if let Some(iq) = q.iser.as_mut() {
                let mut out = std::mem::take(&mut self.iser_out);
                iq.conn.tick(now.saturating_duration_since(zero), &mut out);
                self.iser_actions(&mut q, out, None);
            }
            self.queues.put(q);
        }
    }

    /// Answers the reinstating logins whose old sessions are gone; closes those still waiting
    /// after [`REINSTATE_WAIT`] (the initiator retries its login later).
    fn iser_release_logins(&mut self) {
        let now = self.clock();
        let held = std::mem::take(&mut self.iser_held);
        for h in held {
            let waiting = {
                let sessions = super::lock(&self.shared.iscsi_sessions);
                h.waits_for.iter().any(|c| sessions.contains_key(c))
            };
            let Some(mut q) = self.queues.take(h.qpn) else {
                continue;
            };
            if !waiting {
                self.iser_actions(&mut q, h.actions, None);
            } else if now.saturating_duration_since(h.since) >= REINSTATE_WAIT {
                q.close(format!(
                    "the old session of a reinstating login still has tasks after {} s",
                    REINSTATE_WAIT.as_secs()
                ));
            } else {
                self.iser_held.push(h);
            }
            self.queues.put(q);
        }
    }

    /// Runs `out`'s actions (drained) and keeps the vector as the poller's scratch. `slot` is
    /// the receive whose immediate data the task among them takes.
    fn iser_actions(&mut self, q: &mut Queue<F>, mut out: Vec<Action>, mut slot: Option<Slot>) {
        let mut it = out.drain(..).peekable();
        while let Some(a) = it.next() {
            match a {
                Action::Send(p) => {
                    // A SEND followed by Close closes the connection when it has been sent.
                    let close = matches!(it.peek(), Some(Action::Close(_)));
                    if close {
                        if let Some(Action::Close(why)) = it.next() {
                            tracing::debug!("iSCSI connection closes after its answer: {why}");
                        }
                    }
                    self.iser_send(q, &p, close);
                }
                Action::WriteThenSend { remote, data, send } => {
                    self.iser_write_then_send(q, remote, &data, &send)
                }
                Action::FullFeature { recv_len } => {
                    // The receives were posted with the login's size, which full feature keeps
                    // (TargetRecvDataSegmentLength is at most what they hold).
                    let have = HEAD_LEN + crate::iser::LOGIN_RECV_DATA as usize;
                    if recv_len > have {
                        q.close(format!(
                            "full-feature receives of {recv_len} bytes, posted {have}"
                        ));
                    }
                }
                Action::Task(t) => {
                    let s = if t.immediate.1 > 0 { slot.take() } else { None };
                    self.iser_task(q, t, s)
                }
                Action::Close(why) => q.close(format!("iSCSI: {why}")),
            }
        }
        drop(it);
        self.iser_out = out;
        if let Some(s) = slot {
            self.post_recv(q, s);
        }
    }

    /// A pool buffer of at least `len` bytes: the smallest class that has one free, not only
    /// the smallest that fits (a PDU waits for no buffer: login and data-in are rare).
    fn iser_buf(&mut self, len: usize) -> Option<raidline_raid::IoBuf> {
        self.pool
            .get(len)
            .or_else(|| self.pool.get(self.pool.max_len()))
    }

    /// Posts one iSCSI PDU: inline when it fits, else from a pool buffer; with `close`, the
    /// connection closes once it has been sent.
    fn iser_send(&mut self, q: &mut Queue<F>, payload: &[u8], close: bool) {
        if q.closing {
            return;
        }
        if payload.len() <= INLINE_MAX {
            let mut wr = [SendWr {
                wr_id: WrId(0),
                op: SendOp::Send,
                payload: Payload::Inline(payload),
                signaled: true,
            }];
            let t0 = self.pace.post_began();
            let posted = q.ep.post_send(Wr::IserSend { buf: None, close }, &mut wr);
            self.pace.post_ended(t0);
            if let Err(rej) = posted {
                q.close(format!("iSCSI PDU not posted: {}", rej.error));
            }
            return;
        }
        let Some(mut buf) = self.iser_buf(payload.len()) else {
            return q.close("no pool buffer for an iSCSI PDU");
        };
        buf[..payload.len()].copy_from_slice(payload);
        let sge = match self.pool.sge(&buf, payload.len()) {
            Ok(s) => s,
            Err(e) => {
                self.pool.put(buf);
                return q.close(format!("iSCSI PDU buffer: {e}"));
            }
        };
        let sges = [sge];
        let mut wr = [SendWr {
            wr_id: WrId(0),
            op: SendOp::Send,
            payload: Payload::Sges(&sges),
            signaled: true,
        }];
        let ctx = Wr::IserSend {
            buf: Some(buf),
            close,
        };
        let t0 = self.pace.post_began();
        let posted = q.ep.post_send(ctx, &mut wr);
        self.pace.post_ended(t0);
        if let Err(rej) = posted {
            if let Wr::IserSend { buf: Some(b), .. } = rej.ctx {
                self.pool.put(b);
            }
            q.close(format!("iSCSI PDU not posted: {}", rej.error));
        }
    }

    /// Data-in answered at once (INQUIRY, READ CAPACITY, …): RDMA WRITE from a pool buffer,
    /// then the response, one chain.
    fn iser_write_then_send(
        &mut self,
        q: &mut Queue<F>,
        remote: raidline_scsi::iser::RemoteBuffer,
        data: &[u8],
        send: &[u8],
    ) {
        if q.closing {
            return;
        }
        let Some(mut buf) = self.iser_buf(data.len().max(1)) else {
            return q.close("no pool buffer for data-in");
        };
        buf[..data.len()].copy_from_slice(data);
        let sge = match self.pool.sge(&buf, data.len()) {
            Ok(s) => s,
            Err(e) => {
                self.pool.put(buf);
                return q.close(format!("data-in buffer: {e}"));
            }
        };
        let sges = [sge];
        let mut wrs = [
            SendWr {
                wr_id: WrId(0),
                op: SendOp::RdmaWrite(RemoteBuf {
                    addr: remote.va,
                    rkey: remote.stag,
                }),
                payload: Payload::Sges(&sges),
                signaled: false,
            },
            SendWr {
                wr_id: WrId(0),
                op: SendOp::Send,
                payload: Payload::Inline(send),
                signaled: true,
            },
        ];
        if send.len() > INLINE_MAX {
            self.pool.put(buf);
            return q.close("an iSCSI response too long to go inline");
        }
        let ctx = Wr::IserSend {
            buf: Some(buf),
            close: false,
        };
        let t0 = self.pace.post_began();
        let posted = q.ep.post_send(ctx, &mut wrs);
        self.pace.post_ended(t0);
        if let Err(rej) = posted {
            if let Wr::IserSend { buf: Some(b), .. } = rej.ctx {
                self.pool.put(b);
            }
            q.close(format!("data-in not posted: {}", rej.error));
        }
    }

    /// A request box for an iSCSI task.
    fn iser_req(&mut self, itt: u32) -> Box<Req> {
        let started = self.clock();
        self.new_req(None, raidline_proto::Sqe::new(0, 0), 0, started, itt)
    }

    /// Starts a task's storage work, as an NVMe command's; `slot` holds its immediate data.
    fn iser_task(&mut self, q: &mut Queue<F>, t: Task, slot: Option<Slot>) {
        let target = q
            .iser
            .as_ref()
            .and_then(|i| i.conn.session())
            .and_then(|s| s.target_name.clone())
            .unwrap_or_default();
        let Some(ns) = q.iser.as_ref().and_then(|i| i.units.ns_of(&target, t.lun)) else {
            if let Some(s) = slot {
                self.post_recv(q, s);
            }
            return self.iser_finish(q, t.itt, Err(Sense::lun_not_supported()));
        };
        let bs = u64::from(self.shared.namespaces[ns].info.block_size);
        let mut req = self.iser_req(t.itt);
        req.slot = slot;
        match t.io {
            Io::Read { lba, blocks, .. } => {
                let len = (u64::from(blocks) * bs) as usize;
                req.step = Step::Read { ns, lba, len };
                req.account = Some((ns, true, len as u64));
                req.write_back = t.deliver.map(|(r, n)| {
                    (
                        RemoteBuf {
                            addr: r.va,
                            rkey: r.stag,
                        },
                        n as usize,
                    )
                });
                self.with_buffer(q, req, len, AfterBuf::Storage);
            }
            Io::Write { lba, blocks, fua } => {
                let len = (u64::from(blocks) * bs) as usize;
                req.step = Step::Write { ns, lba, len, fua };
                req.account = Some((ns, false, len as u64));
                self.iser_data_in(q, req, &t, len);
            }
            Io::Flush => {
                req.flush_nss.clear();
                req.flush_nss.push_back(ns);
                req.step = Step::Flush;
                self.submit(q, req);
            }
            Io::WriteZeroes { lba, blocks, .. } => {
                let pieces: VecDeque<(u64, u64)> = [(lba, u64::from(blocks))].into();
                let len = self.zero_len(&pieces);
                req.step = Step::Zero { ns, pieces };
                self.with_buffer(q, req, len, AfterBuf::Storage);
            }
            io @ (Io::WriteSame { .. } | Io::Unmap { .. }) => {
                let len = t.immediate.1 + t.fetch.map_or(0, |(_, n)| n as usize);
                req.step = Step::ScsiOut { ns, lun: t.lun, io };
                self.iser_data_in(q, req, &t, len);
            }
        }
    }

    /// Brings a task's `len` bytes of data-out to its request, then [`Self::on_data`]:
    /// - all of it immediate, at the start of the receive's data buffer: that buffer is the
    ///   request's data (zero-copy, as NVMe's in-capsule data);
    /// - none immediate: RDMA READ into a pool buffer (zero-copy);
    /// - some immediate (open-iscsi sends up to TargetRecvDataSegmentLength, 8 KiB, of any
    ///   larger write that way): the immediate bytes are copied to the front of a pool buffer
    ///   and the rest is fetched after them, as LIO's isert does. The copy is counted in
    ///   `raidline_payload_bytes_copied_total`.
    fn iser_data_in(&mut self, q: &mut Queue<F>, mut req: Box<Req>, t: &Task, len: usize) {
        let (at, n) = t.immediate;
        let fetched = t.fetch.map_or(0, |(_, m)| m as usize);
        // IserConn makes these agree (and refuses immediate data behind an AHS); a task that
        // does not is answered, not run.
        if n + fetched != len || at != 0 || (n > 0 && req.slot.is_none()) {
            if let Some(s) = req.slot.take() {
                self.post_recv(q, s);
            }
            let itt = req.itt;
            self.recycle(req);
            return self.iser_finish(q, itt, Err(Sense::internal_failure()));
        }
        match t.fetch {
            None => {
                req.icd_len = n;
                let loc = DataLocation::InCapsule { length: n as u32 };
                self.fetch(q, req, loc, len);
            }
            Some((r, _)) => {
                req.immediate = (at, n);
                let remote = RemoteBuf {
                    addr: r.va,
                    rkey: r.stag,
                };
                self.with_buffer(q, req, len, AfterBuf::Fetch(remote));
            }
        }
    }

    /// Copies a request's immediate data from its receive to the front of its pool buffer,
    /// and gives the receive back.
    pub(super) fn iser_take_immediate(&mut self, q: &mut Queue<F>, req: &mut Req) {
        let (at, n) = req.immediate;
        let Some(slot) = req.slot.take() else {
            return;
        };
        let src = slot.icd.as_ref().and_then(|b| b.get(at..at + n));
        match (src, req.data.as_mut().and_then(|b| b.get_mut(..n))) {
            (Some(src), Some(dst)) => {
                dst.copy_from_slice(src);
                self.shared
                    .data_path
                    .payload_bytes_copied
                    .fetch_add(n as u64, Ordering::Relaxed);
            }
            // IserConn::plan bounds them by the receive and the command: not written with
            // stale bytes in front, whatever happened.
            _ => q.close(format!(
                "immediate data at {at}+{n} does not fit its receive or buffer"
            )),
        }
        // What is fetched lands after the copied bytes.
        req.immediate = (0, n);
        self.post_recv(q, slot);
    }

    /// UNMAP's parameter list or WRITE SAME's block is here: the unit reads it, and the ranges
    /// are zeroed (deallocated: they read back as zeroes).
    pub(super) fn iser_data_out(
        &mut self,
        q: &mut Queue<F>,
        mut req: Box<Req>,
        ns: usize,
        lun: u16,
        io: Io,
    ) {
        let target = q
            .iser
            .as_ref()
            .and_then(|i| i.conn.session())
            .and_then(|s| s.target_name.clone())
            .unwrap_or_default();
        let pieces: Result<VecDeque<(u64, u64)>, Sense> = {
            let unit = q
                .iser
                .as_ref()
                .and_then(|i| crate::iser::Units::unit(&i.units, &target, lun));
            let bytes = req.data_bytes();
            match (unit, io) {
                (None, _) => Err(Sense::lun_not_supported()),
                (Some(u), Io::Unmap { .. }) => u
                    .unmap_list(bytes)
                    .map(|r| r.iter().map(|r| (r.lba, u64::from(r.blocks))).collect()),
                (Some(u), Io::WriteSame { lba, blocks, unmap }) => u
                    .write_same(lba, blocks, unmap, bytes)
                    .map(|WriteSameAction::WriteZeroes { lba, blocks, .. }| {
                        [(lba, u64::from(blocks))].into()
                    }),
                (Some(_), _) => Err(Sense::internal_failure()),
            }
        };
        self.drop_data(&mut req);
        // The data (all of it immediate, in the receive) has been read: the receive goes back
        // before any zeroing runs.
        if let Some(slot) = req.slot.take() {
            self.post_recv(q, slot);
        }
        match pieces {
            Err(s) => {
                let itt = req.itt;
                self.recycle(req);
                self.iser_finish(q, itt, Err(s));
            }
            Ok(p) if p.is_empty() => self.iser_respond(q, req, Status::SUCCESS),
            Ok(p) => {
                let len = self.zero_len(&p);
                req.step = Step::Zero { ns, pieces: p };
                self.with_buffer(q, req, len, AfterBuf::Storage);
            }
        }
    }

    /// A task's storage work ended with `status` (NVMe's, from the shared path): its SCSI
    /// Response, with its read data RDMA-written ahead of it.
    pub(super) fn iser_respond(&mut self, q: &mut Queue<F>, mut req: Box<Req>, status: Status) {
        if req.data_src == DataSrc::Icd {
            self.drop_data(&mut req);
        }
        // A write's immediate data was written from its receive: the receive goes back.
        if let Some(s) = req.slot.take() {
            if q.closing {
                self.drop_slot(q, s);
            } else {
                self.post_recv(q, s);
            }
        }
        let lba = match &req.step {
            Step::Read { lba, .. } | Step::Write { lba, .. } => *lba,
            _ => 0,
        };
        let result = if status.is_success() {
            Ok(())
        } else {
            let kind = match status.code {
                StatusCode::UNRECOVERED_READ_ERROR => StorageError::Unrecovered,
                StatusCode::WRITE_FAULT => StorageError::WriteFault,
                StatusCode::NS_NOT_READY => StorageError::NotReady,
                _ => StorageError::Internal,
            };
            Err(crate::scsi::sense_for_storage_error(kind, lba))
        };
        if self.account(&req, result.is_ok()) {
            self.shared
                .data_path
                .iscsi_io
                .fetch_add(1, Ordering::Relaxed);
        }
        if q.closing {
            return self.recycle(req);
        }
        let Some(mut iq) = q.iser.take() else {
            return self.recycle(req);
        };
        let mut out = std::mem::take(&mut self.iser_out);
        // Read data goes ahead of its response, perhaps after what `out` holds (the pacer
        // may keep it): that response is numbered as it goes (`iser_read_response`).
        let later = result.is_ok() && super::pace::write_len(&req, Status::SUCCESS).is_some();
        let responds = iq.conn.complete(req.itt, result, later, &mut out);
        q.iser = Some(iq);
        // The task's own response comes first in `out`, unless task management aborted the
        // task: then its data goes nowhere either.
        let delivers = responds && later && matches!(out.first(), Some(Action::Send(_)));
        if delivers {
            let Some(Action::Send(resp)) = (!out.is_empty()).then(|| out.remove(0)) else {
                return self.recycle(req);
            };
            req.iser_resp = resp;
            // Paced as NVMe/RDMA's read data: it waits for the bucket (or goes in chunks).
            if let Some(req) = self.pace_response(q, req, Status::SUCCESS, 0) {
                self.iser_read_response(q, req);
            }
        } else {
            self.recycle(req);
        }
        self.iser_actions(q, out, None);
    }

    /// RDMA WRITE of a read's data from its pool buffer (what paced chunks have not sent
    /// already), then its response ([`Req::iser_resp`]); the request (and its buffer) comes
    /// back when the SEND completes.
    pub(super) fn iser_read_response(&mut self, q: &mut Queue<F>, mut req: Box<Req>) {
        if q.closing {
            return self.recycle_posted(q, req);
        }
        let (Some((remote, n)), Some(buf)) = (req.write_back, req.data.as_ref()) else {
            return self.recycle_posted(q, req);
        };
        let sge = match self.pool.sge(buf, n) {
            Ok(s) => s,
            Err(e) => {
                q.close(format!("read buffer: {e}"));
                return self.recycle_posted(q, req);
            }
        };
        if req.iser_resp.len() > INLINE_MAX {
            q.close("an iSCSI response too long to go inline");
            return self.recycle_posted(q, req);
        }
        let done = req.chunked as u32;
        let (to, from) = super::pace::data_at(remote, sge, u64::from(done), sge.length - done);
        let len = u64::from(from.length);
        let mut resp = std::mem::take(&mut req.iser_resp);
        // Its StatSN now, in the order the responses go (see `IserConn::complete`).
        if !q.iser.as_mut().is_some_and(|iq| iq.conn.number(&mut resp)) {
            q.close("an iSCSI read's response is not a SCSI Response");
            return self.recycle_posted(q, req);
        }
        req.paced_len = len;
        let sges = [from];
        let mut wrs = [
            SendWr {
                wr_id: WrId(0),
                op: SendOp::RdmaWrite(to),
                payload: Payload::Sges(&sges),
                signaled: false,
            },
            SendWr {
                wr_id: WrId(0),
                op: SendOp::Send,
                payload: Payload::Inline(&resp),
                signaled: true,
            },
        ];
        let t0 = self.pace.post_began();
        let posted = q.ep.post_send(Wr::Resp(req), &mut wrs);
        self.pace.post_ended(t0);
        match posted {
            Ok(()) => self.pace_sent(q, len, Dir::Out),
            Err(rej) => {
                q.close(format!("read response not posted: {}", rej.error));
                if let Wr::Resp(r) = rej.ctx {
                    self.recycle_posted(q, r);
                }
            }
        }
    }

    /// A task that ended before storage (no namespace, a bad data-out).
    fn iser_finish(&mut self, q: &mut Queue<F>, itt: u32, result: Result<(), Sense>) {
        let Some(mut iq) = q.iser.take() else {
            return;
        };
        let mut out = std::mem::take(&mut self.iser_out);
        iq.conn.complete(itt, result, false, &mut out);
        q.iser = Some(iq);
        self.iser_actions(q, out, None);
    }
}
