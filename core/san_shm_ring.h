/* core — shm provider: one direction of a control channel, an SPSC ring of sealed frames. */
#ifndef SAN_SHM_RING_H
#define SAN_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A ring carries the session messages of one direction of one switched connection. The engine
 * puts two of them in one memfd, maps it in both processes, and gives each process a producer
 * handle on one ring and a consumer handle on the other. See docs/protocol.md, "shm provider:
 * ring layout and doorbells", for the same text with diagrams.
 *
 * Layout of one ring (host byte order: both ends run on the same host):
 *
 *   offset 0    block 0   magic, version, hdr_size, data_size   (set by san_shm_ring_init),
 *                         cons_edges                            (set by the consumer, rarely),
 *                         the direct grant slot                 (see san_shm_ring_direct_offer)
 *   offset 128  block 1   prod, cons_armed      (the line the producer writes on every commit)
 *   offset 256  block 2   cons, prod_armed      (the line the consumer writes on every release)
 *   offset 384  data area, data_size bytes, a power of two
 *
 * prod and cons are 64-bit byte counters that never wrap (2^64 bytes is centuries at any
 * speed); a position p lives at data[p & (data_size - 1)]. prod - cons bytes are in use. The
 * blocks are 128 bytes apart, not 64, because x86 prefetches cache lines in pairs: the
 * producer's and the consumer's hot lines must not share a pair.
 *
 * Frames. Every message is sealed by proto/san_frame (header ... trailer with seq and XXH64),
 * 8-byte aligned, and never straddles the end of the data area. When the frame does not fit
 * in the bytes left before the end (the "tail"), the producer writes an 8-byte PAD marker at
 * the current position, skips the tail and writes the frame at offset 0; it commits the PAD and
 * the frame together. The marker is
 *
 *   bytes 0-3  00 50 41 44  ("\0PAD": byte 0 is 0, which no frame header has: version >= 1)
 *   bytes 4-7  seq of the frame that follows, big-endian
 *
 * and always fits: positions are multiples of 8, so the tail is 0 or at least 8 bytes. The
 * frame's seq is stamped by the ring (per direction, from 0), not by the caller.
 *
 * Trust. The peer may be hostile or buggy and may write anything anywhere in the mapping at
 * any time. So each side keeps its own index and every geometry value in its private handle,
 * copies the header once at attach (checked) and never reads it again, and treats the peer's
 * index only as a claim that it checks: the consumer requires the producer index to be a
 * multiple of 8, never below the last one published (a MOVED slot's src_to may run ahead of
 * it) and never to claim more than data_size bytes beyond what the consumer released; the
 * producer requires the consumer index never to go backwards and never to pass the producer
 * index (nor, once held frames are dropped, the index the hold began at). Every read of the data area is bounded by the private
 * geometry, so no index or length a peer writes can move a read outside the data area. A
 * violation is -EPROTO, and sticky: the handle refuses every later call with -EPROTO (why says
 * which rule), since a ring that lied once cannot be trusted again. A peer can still withhold
 * frames or doorbells (or clear our armed flag): that is a liveness failure, left to the TCP
 * anchor and keepalives (docs/protocol.md §13), never a memory-safety one.
 *
 * The producer index is the commit: frame bytes are written first, then prod is published with
 * a store that is (at least) a release, and the consumer loads prod with (at least) acquire
 * before it reads a frame. Every byte below prod is therefore complete when the consumer looks
 * at it, so a frame inside [rd, prod) that fails san_frame_check() is not "not there yet": it
 * is a protocol error at once. Bytes at or beyond prod are not looked at ("not there yet" is
 * -EAGAIN), except the frames a given-up direct-read offer moved there (up to a MOVED slot's
 * src_to, checked as the producer index is: san_shm_ring_src_move). The seq/hash trailer is
 * kept anyway: it catches a peer that published an index before its bytes, skipped or
 * repeated a frame, or scribbled over one; and it is the same frame format an RDMA-write ring
 * will need, where no index orders the bytes.
 *
 * A checked frame still lies in memory the peer can write. The ring guarantees only that
 * msg..msg+len lies inside the data area. Decode it once (san_msg_decode into a private struct)
 * and never re-read a length from the shared bytes; payload bytes may be copied out directly.
 *
 * Doorbells: sleeping without losing a wakeup. The doorbell itself is the engine's (a socket
 * write); the ring only says when one is needed. Four seq_cst operations make the Dekker
 * pattern, once per direction of waiting:
 *
 *   consumer, before sleeping            producer, in commit
 *   (1) cons_armed = armed@rd   seq_cst  (3) prod = new             seq_cst
 *   (2) load prod               seq_cst  (4) load cons_armed        seq_cst
 *       frame there: disarm, don't sleep      set, at rd < new: take it (CAS to 0),
 *       else sleep                            ring the doorbell
 *
 * All four are in the single total order S of seq_cst operations, consistent with program
 * order. If neither side saw the other - (2) read an old prod and (4) read 0 - then (2) < (3)
 * and (4) < (1) in S, and with (1) < (2) and (3) < (4) that is a cycle. So either the consumer
 * sees the frame and does not sleep, or the producer sees the flag and rings. The producer
 * waiting for space is the mirror image: prod_armed = 1, load cons (san_shm_ring_prod_arm)
 * against cons = new, load prod_armed (san_shm_ring_cons_release).
 *
 * The flag carries the read position the consumer sleeps at (rd, in 8-byte units), and the
 * producer takes it (compare-and-swap) only if that position is before the end of what it
 * published: a sleep that began after the consumer had read past our frame is for a later
 * frame, and is left for the commit that publishes it. Without the position, a producer whose
 * load in (4) saw a sleep that then ended (the consumer found the frame and read it) would clear
 * the consumer's next sleep and ring for a frame already read: a doorbell socket readable over
 * an empty ring (wrk, against nginx, counted the EAGAIN after it as an error, a few times in a
 * second). In the case that matters for liveness, (4) sees the flag raised at rd = the old prod,
 * before the new frame's end: it rings.
 *
 * (4) may come later than the commit: a corked send publishes with (3) alone
 * (san_shm_ring_prod_commit_held) and does (4) at the uncork (san_shm_ring_prod_wake), or at its
 * next ordinary commit, whose (4) covers every frame published before it. Until then the
 * argument holds with "rings" read as "will ring": a consumer asleep meanwhile sleeps on, one
 * that looks finds the frames.
 *
 * The engine's order for a sleep is: drain the doorbell fd, then arm, then (if arm returned 0)
 * sleep in poll/epoll on the doorbell fd. Draining after the re-check could swallow a
 * doorbell rung in between, and then sleep forever. Doorbells can be spurious (a producer that saw
 * the flag an instant before the consumer disarmed): a wake-up always re-checks the ring.
 *
 * The doorbell fd's queue is small (a few hundred messages). A producer counts each doorbell it
 * rings in bells, on its own line; a consumer that keeps reading without ever finding the ring
 * empty (so never sleeping) compares the count with the one it noted at its last drain and
 * drains again well before the queue could fill (docs/protocol.md "A bounded doorbell queue").
 *
 * Sizing. With credits (docs/protocol.md §11) at most N messages of at most max_msg bytes are
 * outstanding, plus at most one PAD shorter than a frame (or a rewind's, into an empty ring
 * only, leaving at least the rewind offset free). A data area of at least
 * (N + 1) * san_frame_len(max_msg) bytes therefore never makes a producer that respects its
 * credits see -EAGAIN; the consumer must release a frame's bytes before (or when) it returns
 * the frame's credit.
 *
 * Hot path: reserve and peek are plain loads and stores; commit is one exchange and one load,
 * consume one exchange and one load. No system call, no lock.
 */

#define SAN_SHM_RING_MAGIC 0x53414e52u /* "SANR" */
#define SAN_SHM_RING_VERSION 1
#define SAN_SHM_RING_BLOCK 128	      /* distance between the header's blocks */
#define SAN_SHM_RING_HDR_SIZE 384     /* data area offset */
#define SAN_SHM_RING_MIN (1u << 12)   /* smallest data area: 4 KiB */
#define SAN_SHM_RING_MAX (1ull << 30) /* largest data area: 1 GiB */
#define SAN_SHM_RING_ALIGN 64	      /* the mapping base must be aligned this much */
#define SAN_SHM_PAD_MAGIC 0x00504144u /* "\0PAD", big-endian, first word of a PAD marker */
#define SAN_SHM_PAD_LEN 8

/*
 * The shared header. Written only by san_shm_ring_init() and through the atomics below; every
 * field may hold anything a peer put there, so it is read only as described above.
 */
/* The top bit of an arm word (cons_armed): the rest is the read position, in 8-byte units. */
#define SAN_SHM_ARMED 0x80000000u

struct san_shm_ring_shared {
	/* Block 0: set once by init; checked once and copied at attach. */
	uint32_t magic;	    /* SAN_SHM_RING_MAGIC */
	uint16_t version;   /* SAN_SHM_RING_VERSION */
	uint16_t hdr_size;  /* SAN_SHM_RING_HDR_SIZE: where the data area starts */
	uint64_t data_size; /* bytes of data area; a power of two in [MIN, MAX] */
	/*
	 * 1: the consumer wants a doorbell after every commit, not only when it sleeps (an
	 * edge-triggered epoll watches its X: TCP gives one edge per arrival). Set by the
	 * consumer, rarely; read by the producer at every commit (a line nobody else writes).
	 * A producer that predates the field leaves it alone: its peer just gets fewer edges.
	 */
	_Atomic uint32_t cons_edges;
	/*
	 * The direct grant (docs/protocol.md, "Direct grant on shm"): a consumer about to sleep
	 * in a blocking receive offers its application buffer here; the producer may claim it,
	 * write into it with process_vm_writev, and report with WRITE_DONE. direct_state is
	 * SAN_SHM_DIRECT_* with the offer's id; the other fields are the consumer's, written before
	 * it offers.
	 */
	uint32_t rsvd_align;
	_Atomic uint64_t direct; /* offer id << 32 | SAN_SHM_DIRECT_*: one word, so no ABA */
	uint64_t direct_at;	 /* the consumer's read cursor: current only if prod is still there */
	uint64_t direct_addr;	 /* the buffer, in the consumer's address space */
	uint64_t direct_len;
	/*
	 * The direct read (docs/protocol.md, "Direct read on shm"): a producer blocked in a
	 * large send, whose consumer waits for data, offers its own application buffer here; the
	 * consumer may claim it, read it with process_vm_readv straight into its application's
	 * buffer, and report in the same word (DONE or FAILED, with src_got). The producer
	 * writes src_at/addr/len before it offers, the consumer src_got before it reports.
	 */
	_Atomic uint64_t src; /* offer id << 32 | SAN_SHM_SRC_* */
	uint64_t src_at;      /* the producer's prod when it offered: current while still there */
	uint64_t src_addr;    /* the buffer, in the producer's address space */
	uint64_t src_len;
	uint64_t src_got;     /* bytes the consumer read (DONE), or read before it failed */
	uint64_t src_to;      /* MOVED: the producer index just past the frames that took it */
	/*
	 * The consumer's receive window in bytes, 0 for none: its application set SO_RCVBUF,
	 * and a producer whose own application set SO_SNDBUF keeps at most the sum of the two
	 * unread (docs/protocol.md, "Socket buffer sizes"). Set by the consumer, rarely; read
	 * by the producer at a send. A peer that predates the field leaves it 0: no bound.
	 */
	_Atomic uint32_t cons_window;
	uint32_t rsvd_align1;
	/*
	 * The switch-over word of this ring's direction (core/san_shm_switch.h): the producer
	 * commits its offset X into it, the consumer holds it while it receives over TCP.
	 * Written by both sides, only by compare-and-swap. Unused (0) until a handshake says both
	 * ends switch without a pause (docs/protocol.md §16).
	 */
	_Atomic uint64_t sw;
	/*
	 * The producer's prod when it wrote its MARK on TCP, plus one (0: not yet, or a producer
	 * that predates the field). Written before the MARK's first byte is sent. The consumer,
	 * whose application's number is still the TCP socket until it reads past that MARK,
	 * has had the MARK's arrival as an edge for every frame before it; frames after it get
	 * one from its engine (san_up_watch_rx_edges). A hint: a peer's lie costs only its own
	 * connection's edges.
	 */
	_Atomic uint64_t mark_prod;
	uint8_t rsvd0[SAN_SHM_RING_BLOCK - 128];
	/* Block 1: the producer's line. */
	_Atomic uint64_t prod;	     /* bytes committed, ever; a multiple of 8 */
	_Atomic uint32_t cons_armed; /* consumer sleeps, wants a doorbell: SAN_SHM_ARMED and the
				      * read position it sleeps at, or 1 (an older consumer);
				      * 0: not armed (set by consumer, cleared by who takes it) */
	/*
	 * Doorbells the producer has rung on the consumer's notification socket, ever (mod
	 * 2^32), counted just before each is sent. The consumer compares it with its count at
	 * its last drain: how many may wait unread on its socket, whose queue is bounded
	 * (san_shm_ring_bells_since). A producer that predates the field leaves it 0.
	 */
	_Atomic uint32_t bells;
	/*
	 * The CPU the producer last committed on, plus one (0: not known, or a producer that
	 * predates the field). A consumer about to spin for the next frame does not when the
	 * producer was last seen on its own CPU: there the spin would take the time the producer
	 * needs to write it (san_shm_ring_cons_peer_cpu). A hint; the peer may write anything.
	 */
	_Atomic uint32_t prod_cpu;
	uint8_t rsvd1[SAN_SHM_RING_BLOCK - 20];
	/* Block 2: the consumer's line. */
	_Atomic uint64_t cons;	     /* bytes released, ever */
	_Atomic uint32_t prod_armed; /* 1: producer sleeps, wants space (set by producer) */
	uint8_t rsvd2[SAN_SHM_RING_BLOCK - 12];
};
_Static_assert(sizeof(struct san_shm_ring_shared) == SAN_SHM_RING_HDR_SIZE &&
		       offsetof(struct san_shm_ring_shared, prod) == SAN_SHM_RING_BLOCK &&
		       offsetof(struct san_shm_ring_shared, cons) == 2 * SAN_SHM_RING_BLOCK,
	       "shm ring header layout changed: bump SAN_SHM_RING_VERSION, update docs/protocol.md "
	       "(shm provider: ring layout) and check_shm_ring.c");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
	       "shared-memory indices need lock-free 64-bit atomics");

/* Producer handle: private to the producing process. Fields are read-only for callers. */
struct san_shm_prod {
	struct san_shm_ring_shared *sh;
	uint8_t *data;	    /* the data area */
	uint64_t size;	    /* data area bytes (private copy) */
	uint32_t max_msg;   /* largest message (header + len) this ring carries */
	uint32_t seq;	    /* seq of the next frame */
	uint64_t prod;	    /* bytes committed: the truth, never read back from sh */
	uint64_t cons;	    /* last consumer index seen and checked */
	uint64_t res_pad;   /* open reservation: tail bytes it skips (PAD), or 0 */
	uint32_t res_cap;   /* open reservation: frame bytes, 0 if none */
	bool res_rewind;    /* open reservation: its PAD is a rewind's */
	int err;	    /* 0, or -EPROTO once the peer broke the ring (sticky) */
	const char *why;    /* with err: which rule, for the log */
	bool hold;	    /* commits seal and advance prod but do not publish it (src_move) */
	bool unhashed;	    /* the consumer takes frames without a hash (SAN_CAP_UNHASHED) */
	uint64_t hold_prod; /* with hold: prod and seq where it began */
	uint32_t hold_seq;
	/*
	 * Rewind (san_shm_ring_prod_rewind): 0, or the data-area offset past which a frame
	 * written into an empty ring goes to offset 0 instead, behind a PAD over the rest.
	 */
	uint64_t rewind_at;
	uint64_t rewind_look; /* no look at cons for a rewind before prod reaches this */
	bool rewind_missed;   /* the last look found a few bytes unread (rewind_pad) */
	uint64_t skip_from;   /* the last rewind's PAD: [skip_from, skip_to), no message in it */
	uint64_t skip_to;
	uint64_t hold_look, hold_skip_from, hold_skip_to; /* with hold: as at its start */
	bool hold_missed;
};

/* Consumer handle: private to the consuming process. Fields are read-only for callers. */
struct san_shm_cons {
	struct san_shm_ring_shared *sh;
	uint8_t *data;
	uint64_t size;
	uint32_t max_msg;
	uint32_t seq;	   /* seq expected at rd */
	uint64_t rd;	   /* read cursor: where the next frame (or PAD) starts */
	uint64_t cons;	   /* bytes released to the producer: the truth */
	uint64_t prod;	   /* last producer index seen and checked (or a move's src_to) */
	uint64_t pub;	   /* last producer index seen published in sh->prod */
	uint64_t peek_end; /* end of the frame peeked at rd, 0 if none */
	/*
	 * Frames before this position were checked whole once, hash included: a reader that
	 * looks again (FIONREAD, MSG_PEEK, then the receive) does not hash them again. The hash
	 * guards against torn frames, and a committed frame does not change; a peer that rewrites
	 * one could as well have written it with a right hash. Copies of this struct (a peek's
	 * walk) hand it back (san_shm_ring_cons_known).
	 */
	uint64_t hashed_to;
	bool unhashed_ok; /* we said we take frames without a hash (SAN_CAP_UNHASHED) */
	uint32_t peek_len;
	const void *peek_msg;
	int err;
	const char *why;
	/*
	 * The last san_shm_ring_cons_arm() found something after the producer had taken our
	 * flag: its doorbell is on its way, and we must not ring ourselves for the same thing.
	 */
	bool bell_coming;
	/*
	 * Our flag is up: the last san_shm_ring_cons_arm() left it (san_shm_ring_cons_unarm).
	 * bells_due: doorbells owed to X that the caller has not taken off it yet. A producer
	 * that takes our flag rings after it (one send(), a moment later): until then the frame
	 * it rings for is readable in the ring, and may be read and X drained before the
	 * doorbell lands, which would then leave X readable over an empty ring.
	 */
	bool armed;
	uint32_t bells_due;
	uint8_t bell_giveups; /* waits for bells_due that ran out (san_conn_rx_arm) */
	uint32_t bells_late;  /* owed, not landed when the wait ran out: taken off when they do */
	uint32_t bells_at;    /* the producer's bells count when we last drained X */
	uint32_t bells_self;  /* doorbells we rang on our own X since (san_conn.c ring_self) */
};

/* A frame handed out by san_shm_ring_cons_peek(). */
struct san_shm_frame {
	const void *msg; /* the message, header first, inside the data area */
	uint32_t len;	 /* bytes from msg up to the trailer (message + pad to 8): decode bound */
	uint32_t seq;	 /* its sequence number (already checked) */
	uint64_t end;	 /* ring position just past it: an argument for san_shm_ring_cons_release */
};

/* Bytes a mapping needs for a ring with data_size bytes of data area. */
static inline size_t san_shm_ring_bytes(uint64_t data_size)
{
	return SAN_SHM_RING_HDR_SIZE + (size_t)data_size;
}

/*
 * Initialise a ring at base (the creator does this once, before either side attaches):
 * header, zero indices, both flags clear. data_size: a power of two in [MIN, MAX] with
 * san_shm_ring_bytes(data_size) <= map_len. 0 or -EINVAL.
 */
int san_shm_ring_init(void *base, size_t map_len, uint64_t data_size);

/*
 * Attach to the ring at base, checking its header against the map_len bytes mapped there.
 * max_msg bounds the message (header + len) of one frame; 0 means the largest allowed: a frame
 * of at most half the data area (and SAN_MSG_MAX), since a bigger one could find no place from
 * some positions (the tail it skips plus itself would exceed the ring). Indices start at 0 on
 * both sides: attach before any frame is sent.
 * 0; -EINVAL for a bad argument (base misaligned, max_msg too big for the ring); -EPROTO when
 * the header is not a ring this build speaks (magic, version, hdr_size, data_size, or a
 * data area that does not fit map_len).
 */
int san_shm_ring_prod_attach(struct san_shm_prod *p, void *base, size_t map_len, uint32_t max_msg);
int san_shm_ring_cons_attach(struct san_shm_cons *c, void *base, size_t map_len, uint32_t max_msg);

/* ---- producer ------------------------------------------------------------------------------ */

/*
 * Keep an empty ring's traffic near its start: a frame reserved while nothing is unread and
 * the position is at or past data-area offset at (a power of two, at least 4 KiB, at most half
 * the data area) goes to offset 0, behind a PAD over the rest, as a frame that does not fit
 * before the end does. A request and its reply then reuse the same few pages and cache lines
 * instead of walking the whole data area, whose pages a new connection would otherwise fault
 * in one by one, in both processes. The consumer needs nothing new: it takes a PAD wherever it
 * is. The producer looks at the consumer's index for it only past at. A look that finds a few
 * bytes unread (at most 4 KiB: likely the reply being written, a header before its body) is
 * tried once more at the next frame; otherwise (a stream) the next look waits at / 64 bytes,
 * one cache-line transfer per 2 KiB of a stream at shm's 128 KiB. 0 turns it off (the default).
 *
 * The price: until the consumer has read the frame after a rewind's PAD, the producer has only
 * the bytes before it (at least at) instead of the whole ring; a peer that leaves more unread
 * than that in small frames waits for its reader sooner (kernel TCP's own default receive
 * buffer, 128 KiB, bounds such a peer too).
 */
void san_shm_ring_prod_rewind(struct san_shm_prod *p, uint64_t at);

/*
 * The PAD a frame of flen bytes at position at may need before it, as a reserve counts it: the
 * tail when the frame does not fit before the end; and for the first frame into an empty ring
 * (first) also when a rewind may take it to the start. An upper bound for planning (a rewind
 * also waits for a look at the consumer's index to find the ring empty).
 */
static inline uint64_t san_shm_ring_prod_pad(const struct san_shm_prod *p, uint64_t at,
					     uint64_t flen, bool first)
{
	uint64_t off = at & (p->size - 1), tail = p->size - off;

	if (flen > tail || (first && p->rewind_at && off >= p->rewind_at && flen <= off))
		return tail;
	return 0;
}

/*
 * Ring bytes committed since position from (prod - from), less the part of the last rewind's
 * PAD that lies after from: it holds no message and may span most of the ring. A sender that
 * bounds its unread bytes by SO_SNDBUF and SO_RCVBUF (from: the consumer's index), or its
 * corked bytes (from: where the hold began), counts frames only.
 */
uint64_t san_shm_ring_prod_since(const struct san_shm_prod *p, uint64_t from);

/*
 * Reserve room for a message of msg_len bytes (header + len, as san_msg_size() counts). On
 * success *buf points into the data area and the return value is the room in bytes (the
 * frame length, > 0): encode the message there (san_msg_encode(m, *buf, room)), then commit.
 * The seq field is overwritten at commit. -EAGAIN: not enough free space (the back-pressure
 * credits normally prevent; see san_shm_ring_prod_arm); -EMSGSIZE: msg_len below a header or
 * above max_msg; -EPROTO: broken ring. A second reserve before commit replaces the first.
 */
int san_shm_ring_prod_reserve(struct san_shm_prod *p, uint32_t msg_len, void **buf);

/*
 * Stamp the next seq into the reserved message, seal it (san_frame_seal; the encoded message
 * may be shorter than reserved) and publish it. Returns 1 if the consumer is asleep and the
 * caller must ring its doorbell, 0 if not; -EINVAL if nothing is reserved or no valid message
 * header is there (the reservation is dropped, nothing is published); -EPROTO: broken ring.
 */
int san_shm_ring_prod_commit(struct san_shm_prod *p);

/*
 * The same, without looking for a sleeping consumer (a corked send: core/san_conn.c): 0 or
 * the errors above. A consumer that armed before it sleeps on until san_shm_ring_prod_wake;
 * one that looks meanwhile finds the frame (its flag not taken: no doorbell owed to it).
 */
int san_shm_ring_prod_commit_held(struct san_shm_prod *p);

/* After held commits: 1 if the consumer sleeps for something published (ring it), else 0. */
int san_shm_ring_prod_wake(struct san_shm_prod *p);

/*
 * About to sleep until a message of msg_len bytes fits: set prod_armed, then re-check. Returns
 * 1 if it fits now (flag cleared again: retry the reserve, do not sleep); 0 if the caller may
 * sleep on its doorbell (the consumer rings once it releases space); -EMSGSIZE, -EPROTO.
 */
int san_shm_ring_prod_arm(struct san_shm_prod *p, uint32_t msg_len);

/* Clear prod_armed (after waking, or when giving up the wait). */
void san_shm_ring_prod_disarm(struct san_shm_prod *p);

/*
 * Still armed: the consumer has released nothing since the producer armed (its release
 * clears the flag and rings). A plain load; the answer may be stale by the time it is used.
 */
static inline bool san_shm_ring_prod_armed(const struct san_shm_prod *p)
{
	return atomic_load_explicit(&p->sh->prod_armed, memory_order_relaxed) != 0;
}

/*
 * The consumer's index, refreshed and checked (0 or -EPROTO): how far the peer has released.
 * A sender whose messages name memory outside the ring (READ on shm) learns from it when the
 * peer is done with that memory.
 */
int san_shm_ring_prod_released(struct san_shm_prod *p, uint64_t *cons);

/*
 * Like san_shm_ring_prod_arm, but the wait is for the consumer index to reach target rather
 * than for room: 1 if it already has (disarmed), 0 if armed (the consumer's next release
 * answers 1 and the engine rings), -EPROTO.
 */
int san_shm_ring_prod_arm_cons(struct san_shm_prod *p, uint64_t target);

/* ---- consumer ------------------------------------------------------------------------------ */

/*
 * Check the next frame and describe it in *f without consuming it; calling again returns the
 * same frame. 0; -EAGAIN: nothing committed yet; -EPROTO: the peer broke the ring (a bad
 * index, PAD or frame: c->why says which; the ring is dead).
 */
int san_shm_ring_cons_peek(struct san_shm_cons *c, struct san_shm_frame *f);

/*
 * Done with the peeked frame: move past it and release its bytes (and any held before it) to
 * the producer. Returns 1 if the producer waits for space and the caller must ring its
 * doorbell, 0 if not; -EINVAL if no frame is peeked; -EPROTO.
 */
int san_shm_ring_cons_consume(struct san_shm_cons *c);

/*
 * Move past the peeked frame but keep its bytes (a DATA frame the application has not read
 * yet): the next peek looks at the frame after it. 0, -EINVAL, -EPROTO.
 */
int san_shm_ring_cons_skip(struct san_shm_cons *c);

/* A walk over a copy of c checked frames whole: c need not hash them again. */
static inline void san_shm_ring_cons_known(struct san_shm_cons *c, const struct san_shm_cons *walk)
{
	if (walk->hashed_to > c->hashed_to)
		c->hashed_to = walk->hashed_to;
}

/*
 * Release every byte before end (a frame's end from peek, at or behind the read cursor) to
 * the producer; bytes free in ring order. Returns 1 (ring the producer's doorbell) or 0;
 * -EINVAL if end is outside [released, read cursor]; -EPROTO.
 */
int san_shm_ring_cons_release(struct san_shm_cons *c, uint64_t end);

/*
 * About to sleep until a frame arrives: set cons_armed, then re-check. Returns 1 if something
 * is committed at the read cursor (flag cleared again: peek, do not sleep); 0 if the caller may
 * sleep on its doorbell (the producer rings after its next commit); -EPROTO.
 */
int san_shm_ring_cons_arm(struct san_shm_cons *c);

/*
 * Before taking the doorbells off X: take our flag down (if the last arm left it up). A
 * producer that had taken it owes one doorbell, maybe not sent yet: bells_due counts it.
 */
void san_shm_ring_cons_unarm(struct san_shm_cons *c);

/* Clear cons_armed (after waking, or when giving up the wait). */
void san_shm_ring_cons_disarm(struct san_shm_cons *c);

/*
 * Producer: count one doorbell, just before ringing it (bells). Consumer: note the count
 * just before taking the doorbells off its socket (bells_drained), and ask how many were
 * rung since (bells_since): an upper bound, give or take one in flight, on the doorbells
 * waiting there. The count is the peer's to write; a wrong one only makes the consumer
 * drain more or less often.
 */
void san_shm_ring_prod_bell(struct san_shm_prod *p);
void san_shm_ring_cons_bells_drained(struct san_shm_cons *c);
uint32_t san_shm_ring_cons_bells_since(const struct san_shm_cons *c);

/* The producer's CPU at its last commit, plus one; 0 if not known (prod_cpu). */
static inline uint32_t san_shm_ring_cons_peer_cpu(const struct san_shm_cons *c)
{
	return atomic_load_explicit(&c->sh->prod_cpu, memory_order_relaxed);
}

/* Ask for a doorbell after every commit (on), or only when armed (off): cons_edges. */
void san_shm_ring_cons_edges(struct san_shm_cons *c, bool on);
/* The consumer's receive window (bytes, 0: none), as the producer reads it (cons_window). */
void san_shm_ring_cons_window(struct san_shm_cons *c, uint32_t bytes);
uint32_t san_shm_ring_peer_window(const struct san_shm_prod *p);

/* ---- the direct grant slot ----------------------------------------------------------------- */

enum {
	SAN_SHM_DIRECT_FREE = 0,    /* nothing offered */
	SAN_SHM_DIRECT_OFFERED = 1, /* set by the consumer; back to FREE when it revokes */
	SAN_SHM_DIRECT_CLAIMED = 2, /* set by the producer: it writes, then commits WRITE_DONE */
};

/* What a claim hands the producer. */
struct san_shm_direct {
	uint32_t id;
	uint64_t addr, len;
};

/*
 * Consumer, with its ring found empty and armed: offer len bytes at addr (its own address
 * space) under id. 0, or -EBUSY if the slot is not free (a claim not yet answered).
 */
int san_shm_ring_direct_offer(struct san_shm_cons *c, uint32_t id, uint64_t addr, uint64_t len);

/*
 * Consumer, after its wait: take the offer back. true if it was still only offered (FREE now);
 * false if the producer claimed it: its WRITE_DONE is the next frame, and the buffer must
 * stay untouched and valid until it has come.
 */
bool san_shm_ring_direct_revoke(struct san_shm_cons *c);

/* Consumer, after it consumed the claim's WRITE_DONE: the slot is free again. */
void san_shm_ring_direct_done(struct san_shm_cons *c);

/*
 * Producer: claim the offer if there is one and it is still current (nothing committed since
 * the consumer found the ring empty, so the next frame it reads is ours). 1 and *d filled
 * (write, then commit WRITE_DONE{d->id}); 0 if there is nothing to claim.
 */
int san_shm_ring_direct_claim(struct san_shm_prod *p, struct san_shm_direct *d);

/* ---- the direct read slot ------------------------------------------------------------------ */

enum {
	SAN_SHM_SRC_FREE = 0,	 /* nothing offered */
	SAN_SHM_SRC_OFFERED = 1, /* set by the producer; back to FREE when it revokes */
	SAN_SHM_SRC_CLAIMED = 2, /* set by the consumer: it reads, then reports */
	SAN_SHM_SRC_DONE = 3,	 /* the consumer read src_got bytes; the producer frees the slot */
	SAN_SHM_SRC_FAILED = 4,	 /* the consumer could not read (src_got: the prefix it has) */
	SAN_SHM_SRC_MOVED = 5,	 /* the producer gave it up with its bytes already framed in the
				  * ring from src_at to src_to: readable there at once, even
				  * before prod says so (then FREE again) */
};

/* A current offer, as the consumer found it. */
struct san_shm_src {
	uint32_t id;
	uint64_t addr, len;
};

/* Producer: does the consumer wait for data (armed: it found the ring empty and sleeps)? */
bool san_shm_ring_cons_waiting(const struct san_shm_prod *p);

/*
 * Producer, with nothing of its own committed since: offer len bytes at addr (its own address
 * space) under id, at the current end of the ring. 1: the consumer was armed (ring its
 * doorbell), 0: offered; -EBUSY if the slot is not free.
 */
int san_shm_ring_src_offer(struct san_shm_prod *p, uint32_t id, uint64_t addr, uint64_t len);

/*
 * Producer, after a wait: the state of offer id. SAN_SHM_SRC_DONE or _FAILED with *got (at
 * most the offer's length; the slot is free again); SAN_SHM_SRC_FREE if it was revoked now
 * (give_up, and not yet claimed); SAN_SHM_SRC_OFFERED / _CLAIMED: still out, wait; -EPROTO
 * if the consumer wrote something impossible (the slot is free again).
 */
int san_shm_ring_src_settle(struct san_shm_prod *p, uint32_t id, uint64_t len, bool give_up,
			    uint64_t *got);

/*
 * Producer: from now on, commits seal their frames and advance p->prod without publishing
 * them (no doorbell either), until san_shm_ring_src_move publishes them or
 * san_shm_ring_prod_unhold drops them (prod and seq back to where the hold began; a consumer
 * index seen beyond that point released frames the consumer never saw: -EPROTO, sticky).
 */
void san_shm_ring_prod_hold(struct san_shm_prod *p);
void san_shm_ring_prod_unhold(struct san_shm_prod *p);

/*
 * Producer: give offer id up by moving its bytes into the ring, in one step for the consumer
 * (which was woken for them and must never find them gone). Before it, the producer took a
 * hold where the offer stood and committed the frames that carry the bytes (sealed, p->prod
 * advanced, nothing published). If the offer is still OFFERED it becomes MOVED (src_to: the
 * new prod) in one compare-and-swap, so that a consumer that finds it so reads the frames at
 * once, before prod says so; san_shm_ring_src_publish then publishes prod and frees the slot.
 * Returns 0, or -EBUSY if the consumer claimed the offer first (or the word is not ours, or
 * nothing is held): then the held frames are dropped, the slot and the published indices are
 * as they were, and the claim stands. p->hold is clear on return.
 */
int san_shm_ring_src_move(struct san_shm_prod *p, uint32_t id);

/* Producer, right after a successful move: 1 (ring the consumer's doorbell) or 0. */
int san_shm_ring_src_publish(struct san_shm_prod *p);

/*
 * Consumer, with its ring found empty: is there an offer at the read cursor? 1 and *o filled;
 * 2 if there is none but frames came meanwhile (the offer was moved into the ring: peek
 * again; also when the ring broke, which the peek then says); 0 if neither. Reading the
 * offer's bytes without claiming (a peek) is valid only if san_shm_ring_src_still() says so
 * afterwards.
 */
int san_shm_ring_src_find(struct san_shm_cons *c, struct san_shm_src *o);
bool san_shm_ring_src_still(struct san_shm_cons *c, const struct san_shm_src *o);

/* Consumer: take offer o (the producer's buffer stays put until we report). */
bool san_shm_ring_src_claim(struct san_shm_cons *c, const struct san_shm_src *o);

/* Consumer: report a claimed offer: all of got read (ok), or failed after got bytes. */
void san_shm_ring_src_report(struct san_shm_cons *c, const struct san_shm_src *o, bool ok,
			     uint64_t got);

#endif /* SAN_SHM_RING_H */
