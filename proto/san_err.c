/* proto: protocol error codes — names, text and the errno each one surfaces as. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "proto/san_err.h"

struct san_err_desc {
	const char *name;
	const char *text;
};

#define SAN_ERR_DESC(code, txt) [(code)-SAN_PROTO_EBASE] = { #code, txt }

static const struct san_err_desc san_err_table[SAN_PROTO_EEND - SAN_PROTO_EBASE] = {
	SAN_ERR_DESC(SAN_PROTO_ETRUNC, "message truncated"),
	SAN_ERR_DESC(SAN_PROTO_EOVERSIZE, "message larger than allowed"),
	SAN_ERR_DESC(SAN_PROTO_EVERSION, "unknown protocol version"),
	SAN_ERR_DESC(SAN_PROTO_ETYPE, "unknown message type"),
	SAN_ERR_DESC(SAN_PROTO_ECHANNEL, "message type not allowed on this channel"),
	SAN_ERR_DESC(SAN_PROTO_ELENGTH, "message length does not match its type"),
	SAN_ERR_DESC(SAN_PROTO_ERESERVED, "reserved field or flag not zero"),
	SAN_ERR_DESC(SAN_PROTO_ERANGE, "field value out of range"),
	SAN_ERR_DESC(SAN_PROTO_ESEQ, "unexpected sequence number"),
	SAN_ERR_DESC(SAN_PROTO_EHASH, "ring frame hash mismatch"),
	SAN_ERR_DESC(SAN_PROTO_EMAGIC, "switch-over mark missing"),
	SAN_ERR_DESC(SAN_PROTO_ENONCE, "switch-over mark has the wrong nonce"),
	SAN_ERR_DESC(SAN_PROTO_ECREDIT, "credit accounting violated"),
};

static int san_err_abs(int err)
{
	return err < 0 ? -err : err;
}

int san_is_proto_err(int err)
{
	int e = san_err_abs(err);

	return e >= SAN_PROTO_EBASE && e < SAN_PROTO_EEND;
}

const char *san_proto_errname(int err)
{
	if (!san_is_proto_err(err))
		return NULL;
	return san_err_table[san_err_abs(err) - SAN_PROTO_EBASE].name;
}

const char *san_proto_strerror(int err)
{
	int e = san_err_abs(err);
	const char *s;

	if (e == 0)
		return "success";
	if (san_is_proto_err(e))
		return san_err_table[e - SAN_PROTO_EBASE].text;
	/* strerrordesc_np() is the thread-safe, locale-free glibc table lookup. */
	s = strerrordesc_np(e);
	return s ? s : "unknown error";
}

int san_proto_errno(int err)
{
	int e = san_err_abs(err);

	if (!san_is_proto_err(e))
		return e;
	/*
	 * Before switch-over a protocol error only sends the connection back to TCP and the
	 * application sees nothing. After it, the byte stream cannot be trusted any more and
	 * the connection is torn down; TCP has no "protocol error", its word for that is reset.
	 */
	return ECONNRESET;
}
