/* proto: protocol error codes shared by every proto/ module. */
#ifndef SAN_ERR_H
#define SAN_ERR_H

/*
 * proto/ functions return 0 (or a non-negative count) on success and a negative code on failure.
 * Failures caused by the bytes a peer sent are reported with these codes, each distinct, so a
 * test (and sanstat) can tell exactly which rule a message broke. Failures caused by the local
 * caller (bad arguments, output buffer too small) use plain -errno (-EINVAL, -ENOSPC, -ENOBUFS).
 *
 * The codes start at 4096, just above the kernel's MAX_ERRNO (4095), so no value can ever be
 * mistaken for an errno; san_proto_errno() maps them to the errno the application should see.
 */
enum san_proto_err {
	SAN_PROTO_EBASE = 4096,
	SAN_PROTO_ETRUNC = SAN_PROTO_EBASE, /* shorter than a header or than its declared length */
	SAN_PROTO_EOVERSIZE, /* declared length above the receiver's or the type's limit */
	SAN_PROTO_EVERSION,  /* version byte not one this build speaks */
	SAN_PROTO_ETYPE,     /* unknown message type */
	SAN_PROTO_ECHANNEL,  /* known type, but not allowed on this channel */
	SAN_PROTO_ELENGTH,   /* length does not match the type's body */
	SAN_PROTO_ERESERVED, /* reserved field or undefined flag bit not zero */
	SAN_PROTO_ERANGE,    /* field value outside its allowed range */
	SAN_PROTO_ESEQ,	     /* sequence number is not the expected one */
	SAN_PROTO_EHASH,     /* ring-frame trailer hash does not match */
	SAN_PROTO_EMAGIC,    /* bytes at the switch-over offset are not a MARK */
	SAN_PROTO_ENONCE,    /* a MARK, but carrying the wrong nonce */
	SAN_PROTO_ECREDIT,   /* peer sent without a credit or returned too many */
	SAN_PROTO_EEND	     /* one past the last code */
};

/* True for a (positive or negative) proto code, false for an errno or 0. */
int san_is_proto_err(int err);

/* Text for a proto code or an errno, positive or negative; never NULL, never allocates. */
const char *san_proto_strerror(int err);

/* Symbolic name of a proto code ("SAN_PROTO_ETRUNC"), or NULL for anything else. */
const char *san_proto_errname(int err);

/* The errno an application sees when a switched connection dies of this error (positive). */
int san_proto_errno(int err);

#endif /* SAN_ERR_H */
