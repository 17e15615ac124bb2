#!/bin/sh
# Makes the certificates the TLS tests use, in DIR (created):
#   ca.pem                 the cluster's CA
#   server.pem/.key        signed by it, for IP:127.0.0.1 and DNS:localhost, and
#                          the names SAN adds ("IP:10.77.0.1,IP:10.77.0.2")
#   client.pem/.key        signed by it, a client's
#   other-ca.pem           a second CA that signed nothing here
#   other.pem/.key         signed by other-ca (a server cert the CA does not know)
#   expired.pem/.key       signed by ca.pem, valid only in 2020
# openssl 3.0's `x509 -days` cannot go negative: `openssl ca` takes the
# dates outright.
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
q() { "$@" >/dev/null 2>&1 || { echo "mkcerts: failed: $*" >&2; "$@"; exit 1; }; }
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost%s\n' "${SAN:+,$SAN}" >san.ext

newca() { # NAME CN
    q openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.pem" \
        -days 2 -subj "/CN=$2"
}
# NAME CA CN: a key, and a cert for it signed by CA
signed() {
    q openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "/CN=$3"
    q openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
        -out "$1.pem" -days 2 -extfile san.ext
}
newca ca "ferry test CA"
newca other-ca "unrelated CA"
signed server ca localhost
signed client ca "ferry client"
signed other other-ca localhost

# The expired one, through `openssl ca`, which takes a start and an end date.
mkdir -p db
: >db/index.txt
echo 01 >db/serial
cat >ca.cnf <<END
[ca]
default_ca = d
[d]
dir = db
database = db/index.txt
serial = db/serial
new_certs_dir = db
default_md = sha256
policy = p
copy_extensions = none
[p]
commonName = supplied
[x]
subjectAltName = IP:127.0.0.1,DNS:localhost
END
q openssl req -newkey rsa:2048 -nodes -keyout expired.key -out expired.csr -subj "/CN=localhost"
q openssl ca -batch -config ca.cnf -extensions x -cert ca.pem -keyfile ca.key \
    -in expired.csr -out expired.pem -startdate 20200101000000Z -enddate 20200102000000Z -notext
chmod 600 ./*.key
