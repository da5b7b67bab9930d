# quickstart.hcl with the Rust guest (guest-rust): one task, acting for alice,
# holding exactly one capability: GET on the flights origin, under /search.
# The kernel adds the Authorization header itself; the guest never sees the
# token.
task "quickstart" {
  module    = "guest-rust"
  principal = "alice"

  limits {
    memory  = "64MiB"
    timeout = "30s"
  }

  cap "net" "flights" {
    origin        = var.origin
    methods       = ["GET"]
    paths         = ["/search"]
    allow_private = true # the quickstart's origin listens on loopback
    headers       = [{ name = "Authorization", env = "QUICKSTART_FLIGHTS_TOKEN", prefix = "Bearer " }]
  }
}
