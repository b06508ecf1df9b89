/* proto: the upgrade (switch-over) state machine, as a pure transition function. */
#ifndef SAN_UPGRADE_H
#define SAN_UPGRADE_H

#include <stdint.h>

/*
 * One upgrade attempt of one TCP connection, seen from one side. The engine feeds events in;
 * san_upgrade_step() returns the new state and an ordered list of actions for the engine to
 * perform (in that order: "pause the reader, then send ACCEPT" is a rule, not a style). No
 * time, I/O or memory is touched here, so every path is unit-tested. docs/protocol.md §Upgrade
 * has the diagram and the argument for why no byte is lost, duplicated or reordered.
 */

enum san_up_role {
	SAN_UP_ROLE_A = 1, /* connecting side: proposes, decides, commits first */
	SAN_UP_ROLE_B = 2, /* accepting side: proves ownership, pauses, follows */
};

enum san_up_state {
	SAN_UP_IDLE,	  /* candidate: nothing sent yet (B: no PROPOSE yet) */
	SAN_UP_PROPOSED,  /* A: PROPOSE out, ACCEPT timer armed, TCP used as usual */
	SAN_UP_PAUSED,	  /* B: TCP reader paused, ACCEPT out, waiting for A's decision */
	SAN_UP_SWITCHING, /* A: committed, SWITCH posted; MARK waits for its hand-off */
	SAN_UP_COMMITTED, /* A: MARK written, waiting for B's SWITCH */
	SAN_UP_DRAINING,  /* reading TCP up to the peer's offset, then its MARK */
	SAN_UP_SWITCHED,  /* done: both directions on the SAN (terminal) */
	SAN_UP_FALLBACK,  /* done: the connection stays TCP, reason recorded (terminal) */
	SAN_UP_RESET,	  /* done: the connection must be reset, ECONNRESET (terminal) */
	SAN_UP_NSTATES
};

enum san_up_ev {
	SAN_UP_EV_START = 1,	/* A: the engine decides to propose */
	SAN_UP_EV_PROPOSE_OK,	/* B: a PROPOSE arrived and ownership is proven */
	SAN_UP_EV_PROPOSE_BAD,	/* B: a PROPOSE arrived and must be refused (reason) */
	SAN_UP_EV_ACCEPT,	/* A: ACCEPT arrived; reason 0 to commit, else A's veto */
	SAN_UP_EV_REJECT,	/* A: REJECT arrived (reason) */
	SAN_UP_EV_SWITCH,	/* SWITCH arrived (offset = the peer's X) */
	SAN_UP_EV_ABORT,	/* ABORT arrived (reason) */
	SAN_UP_EV_BAD_MSG,	/* a side-channel message failed decode or was unexpected */
	SAN_UP_EV_TIMEOUT,	/* A's ACCEPT timer fired */
	SAN_UP_EV_SENT,		/* our last SWITCH is handed off: delivered before any EOF */
	SAN_UP_EV_NOT_SENT,	/* our last SWITCH was certainly not delivered */
	SAN_UP_EV_SEND_UNKNOWN, /* sending our SWITCH failed and it may have been delivered */
	SAN_UP_EV_SIDE_CLOSED,	/* side channel EOF or error */
	SAN_UP_EV_SAN_ERROR,	/* the SAN channel failed */
	SAN_UP_EV_TCP_CLOSED,	/* TCP EOF, reset or error seen */
	SAN_UP_EV_MARK_OK,	/* the 16 bytes at the peer's offset are its MARK */
	SAN_UP_EV_MARK_BAD,	/* they are not */
	SAN_UP_EV_ABANDON,	/* local wish to stay TCP: app close/shutdown, policy, resources */
	SAN_UP_EV_LOCAL_RESET,	/* the application reset the connection (SO_LINGER 0) */
	SAN_UP_NEVENTS
};

struct san_up_event {
	enum san_up_ev type;
	uint16_t reason; /* REJECT/ABORT/PROPOSE_BAD/ACCEPT-veto/ABANDON reason */
	uint64_t offset; /* SWITCH: the peer's TCP tx offset */
	uint64_t tcp_tx; /* bytes this side has written to TCP so far */
	uint64_t tcp_rx; /* bytes this side has read from TCP so far */
};

enum san_up_act {
	SAN_UP_ACT_SEND_PROPOSE = 1,
	SAN_UP_ACT_SEND_ACCEPT,
	SAN_UP_ACT_SEND_REJECT, /* reason */
	SAN_UP_ACT_SEND_SWITCH, /* arg = our X */
	SAN_UP_ACT_SEND_ABORT,	/* reason */
	SAN_UP_ACT_ARM_TIMER,
	SAN_UP_ACT_CANCEL_TIMER,
	SAN_UP_ACT_PAUSE_RX,	 /* read no more TCP bytes */
	SAN_UP_ACT_RESUME_RX,	 /* read TCP as usual again */
	SAN_UP_ACT_HOLD_TX,	 /* application sends queue in the switch; TCP tx stops at arg */
	SAN_UP_ACT_RELEASE_TX,	 /* undo HOLD_TX: queued bytes go to TCP, in order */
	SAN_UP_ACT_WRITE_MARK,	 /* the peer's nonce, on TCP, right after our X bytes */
	SAN_UP_ACT_START_SAN_TX, /* application sends now go to the SAN */
	SAN_UP_ACT_DRAIN_TO,	 /* deliver TCP bytes up to offset arg, then read the MARK */
	SAN_UP_ACT_START_SAN_RX, /* read only the SAN from now on */
	SAN_UP_ACT_CLOSE_SIDE,
	SAN_UP_ACT_DEFER,    /* not now: feed the event again after the next state change */
	SAN_UP_ACT_FALLBACK, /* reason: record, report, stay TCP */
	SAN_UP_ACT_RESET,    /* reason: reset TCP and the SAN, ECONNRESET to the app */
	SAN_UP_ACT_SWITCHED,
	SAN_UP_NACTS
};

#define SAN_UP_MAX_ACTIONS 6

struct san_up_action {
	enum san_up_act act;
	uint16_t reason;
	uint64_t arg;
};

struct san_up_actions {
	unsigned int n;
	struct san_up_action a[SAN_UP_MAX_ACTIONS];
};

struct san_upgrade {
	enum san_up_role role;
	enum san_up_state state;
	uint16_t reason;    /* why FALLBACK or RESET (enum san_reason) */
	uint64_t tx_mark;   /* our X: TCP bytes we wrote before our MARK */
	uint64_t rx_paused; /* TCP bytes we had read when our reader paused */
	uint64_t rx_mark;   /* the peer's X */
};

/* Connection states as sanstat shows them; the upgrade refines UPGRADING. */
enum san_conn_state {
	SAN_CONN_TCP_ONLY,  /* never eligible (policy, not a TCP stream, window closed) */
	SAN_CONN_CANDIDATE, /* eligible, no upgrade started */
	SAN_CONN_UPGRADING,
	SAN_CONN_SWITCHED,
	SAN_CONN_CLOSING, /* DISCONNECT sent or received, not both */
	SAN_CONN_CLOSED,
	SAN_CONN_FALLBACK, /* an upgrade was tried and the connection stayed TCP */
};

void san_upgrade_init(struct san_upgrade *up, enum san_up_role role);

/*
 * Apply one event. Returns 0 with up and out updated (out may be empty: the event is ignored
 * in this state, e.g. a late ACCEPT after a timeout), or -EINVAL for an event that cannot
 * happen in this state or role (an engine bug), leaving up unchanged and out empty.
 */
int san_upgrade_step(struct san_upgrade *up, const struct san_up_event *ev,
		     struct san_up_actions *out);

/* True once no event can change the state. */
int san_upgrade_done(const struct san_upgrade *up);

/* The connection state this upgrade state belongs to. */
enum san_conn_state san_upgrade_conn_state(const struct san_upgrade *up);

const char *san_up_state_name(enum san_up_state s);
const char *san_up_ev_name(enum san_up_ev e);
const char *san_up_act_name(enum san_up_act a);

#endif /* SAN_UPGRADE_H */
