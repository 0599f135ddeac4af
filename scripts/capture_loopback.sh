#!/usr/bin/env bash
# Records a small capture of real traffic on this machine's loopback interface, for the
# pcap replay example and its test:
#   scripts/capture_loopback.sh OUT.pcap [SECONDS]
# While tcpdump listens on `lo`, a Python HTTP server on 127.0.0.1 and one on ::1 answer
# concurrent curl requests (small pages and a 64 KiB file, keep-alive and not), and a UDP
# echo exchange runs on 127.0.0.1. Only loopback addresses, only the ports opened here,
# at most 4000 frames and SECONDS (default 3) of traffic, headers kept (snap length 96).
# Installs tcpdump and curl (Debian packages) when they are missing; needs root for both.
set -euo pipefail
out=${1:?usage: capture_loopback.sh OUT.pcap [SECONDS]}
secs=${2:-3}
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

need=()
command -v tcpdump >/dev/null || need+=(tcpdump)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y "${need[@]}" >/dev/null 2>&1 ||
    { apt-get update >/dev/null && apt-get install -y "${need[@]}" >/dev/null; }
fi
tcpdump=$(command -v tcpdump)

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# Ports picked from the ephemeral range by the kernel, so parallel runs do not collide.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http4=$(free_port)
http6=$(free_port)
udp=$(free_port)

mkdir -p "$work/www"
for i in $(seq 1 8); do head -c $((i * 700)) /dev/zero | tr '\0' 'a' >"$work/www/page$i.html"; done
head -c 65536 /dev/urandom >"$work/www/blob.bin"

filter="(tcp port $http4) or (tcp port $http6) or (udp port $udp)"
# Unbuffered packet writes (-U), so that stopping tcpdump loses nothing it saw.
"$tcpdump" -i lo -s 96 -c 4000 -U -w "$out" "$filter" 2>"$work/tcpdump.log" &
pids+=($!)
tcpdump_pid=$!
(cd "$work/www" && exec python3 -m http.server --bind 127.0.0.1 "$http4") >/dev/null 2>&1 &
pids+=($!)
(cd "$work/www" && exec python3 -m http.server --bind ::1 "$http6") >/dev/null 2>&1 &
pids+=($!)
python3 - "$udp" >/dev/null 2>&1 <<'EOF' &
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
while True:
    data, peer = s.recvfrom(2048)
    s.sendto(data[::-1], peer)
EOF
pids+=($!)

# Wait until tcpdump listens and both servers answer.
for _ in $(seq 1 100); do
  if grep -q "listening on" "$work/tcpdump.log" &&
    curl -s -o /dev/null "http://127.0.0.1:$http4/page1.html" &&
    curl -s -o /dev/null -g "http://[::1]:$http6/page1.html"; then
    break
  fi
  sleep 0.1
done

end=$((SECONDS + secs))
client() {
  local base=$1
  while [ $SECONDS -lt $end ]; do
    # Several requests over one keep-alive connection, then a connection per request.
    curl -s -g -o /dev/null -o /dev/null -o /dev/null \
      "$base/page1.html" "$base/page5.html" "$base/blob.bin" || true
    curl -s -g -o /dev/null "$base/page$((RANDOM % 8 + 1)).html" || true
    sleep 0.05
  done
}
client "http://127.0.0.1:$http4" &
c1=$!
client "http://[::1]:$http6" &
c2=$!
python3 - "$udp" "$secs" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.5)
end = time.time() + float(sys.argv[2])
n = 0
while time.time() < end:
    s.sendto(b"ping %06d" % n + b"." * (n % 300), ("127.0.0.1", int(sys.argv[1])))
    try:
        s.recvfrom(2048)
    except socket.timeout:
        pass
    n += 1
    time.sleep(0.01)
EOF
c3=$!
wait $c1 $c2 $c3
sleep 0.2
kill -INT "$tcpdump_pid" 2>/dev/null || true
wait "$tcpdump_pid" 2>/dev/null || true
frames=$("$tcpdump" -r "$out" 2>/dev/null | wc -l)
echo "captured $frames frames into $out"
[ "$frames" -gt 0 ]
