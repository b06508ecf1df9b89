# tests/e2e/nginx.sh — an nginx of our own (a master and 2 workers) on a free loopback port, for
# t_app_nginx and make bench (scripts/benchlib/apps.sh). Sourced after lib.sh; the caller sets
# NGINX (the binary) and LISTEN_WAIT, and puts the files to serve in $TMP/www.
# shellcheck shell=bash

# ngx_up NAME MODE — start nginx as MODE (pre|none) on a free loopback port, serving the files of
# $TMP/www (and taking PUTs of up to 64 MiB into $TMP/www/up/), its own files in $TMP/NAME; wait for its listener and its 2 workers. Sets NGX_PID (the
# master), NGX_PORT, NGX_WORKERS (their pids) and NGX_LOG (the error log, where the stats lines go).
NGX_PID='' NGX_PORT='' NGX_WORKERS='' NGX_LOG=''
ngx_up() {
	local name=$1 mode=$2 d=$TMP/$1 try port end user='' w
	[ "$(id -u)" -eq 0 ] && user='user root;' # workers must read $TMP (0700)
	mkdir -p "$d"
	NGX_LOG=$d/error.log
	for try in 1 2 3 4 5; do
		port=$(free_port) || fail "free_port failed"
		cat >"$d/nginx.conf" <<EOF
$user
worker_processes 2;
daemon off;
master_process on;
pid $d/nginx.pid;
error_log $NGX_LOG info;
events { worker_connections 512; }
http {
	access_log off;
	sendfile on;
	tcp_nopush on;
	client_body_temp_path $d/body;
	proxy_temp_path $d/proxy;
	fastcgi_temp_path $d/fastcgi;
	scgi_temp_path $d/scgi;
	uwsgi_temp_path $d/uwsgi;
	default_type application/octet-stream;
	server {
		listen 127.0.0.1:$port;
		root $TMP/www;
		location /up/ { dav_methods PUT; client_max_body_size 64m; }
	}
}
EOF
		: >"$NGX_LOG"
		# -e: the log before the configuration is read; -p: no default prefix under /etc, /var
		spawn "$name" "$mode" "$NGINX" -p "$d/" -c "$d/nginx.conf" -e "$NGX_LOG"
		if wait_listen "$port" "$SPAWN_PID" "$LISTEN_WAIT"; then
			NGX_PID=$SPAWN_PID
			NGX_PORT=$port
			break
		fi
		stop "$SPAWN_PID"
		log "ngx_up $name: try $try on port $port failed"
		show "$NGX_LOG" "$TMP/$name.err"
		[ "$try" -eq 5 ] && fail "could not start nginx ($name)"
	done
	end=$(($(date +%s) + LISTEN_WAIT))
	while :; do
		NGX_WORKERS=$(ps --ppid "$NGX_PID" -o pid=,args= |
			awk '/nginx: worker process/ { printf "%s%s", sep, $1; sep = " " }')
		[ "$(wc -w <<<"$NGX_WORKERS")" -eq 2 ] && break
		if ! alive "$NGX_PID" || [ "$(date +%s)" -ge "$end" ]; then
			show "$NGX_LOG" "$TMP/$name.err"
			fail "$name: nginx did not start 2 workers"
		fi
		sleep 0.05
	done
	if [ "$mode" != none ]; then # pre or pass: preloaded
		assert_preloaded "$NGX_PID"
		for w in $NGX_WORKERS; do assert_preloaded "$w"; done
	fi
}

# ngx_down NAME MODE — graceful stop (SIGQUIT, as `nginx -s quit`), bounded; the master must exit 0,
# the log must show no error, and the stats lines must be there (pre) or not at all (none).
ngx_down() {
	local name=$1 mode=$2 rc=0 p
	kill -QUIT "$NGX_PID" 2>/dev/null
	wait_pid "$NGX_PID" 20 || rc=$?
	no_preload_errors "$NGX_LOG" "$TMP/$name.err"
	[ "$rc" -eq 0 ] || { show "$NGX_LOG" "$TMP/$name.err"; fail "$name: nginx master exited $rc"; }
	for p in $NGX_WORKERS; do
		running "$p" && fail "$name: worker $p still running after the master exited"
	done
	if grep -E '\[(error|crit|alert|emerg)\]' "$NGX_LOG" >&2; then
		show "$NGX_LOG"
		fail "$name: nginx logged errors (above)"
	fi
	if [ "$mode" != none ]; then # pre or pass: preloaded
		for p in "$NGX_PID" $NGX_WORKERS; do pid_line "$NGX_LOG" "$p" >/dev/null || exit 1; done
	elif grep -q '^sanswitch:' "$NGX_LOG" "$TMP/$name.err"; then
		show "$NGX_LOG"
		fail "$name: a stats line from an nginx that was not preloaded"
	fi
}
