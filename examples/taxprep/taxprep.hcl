# Bob's Online Tax Prep, run for Alice with no capability at all: it can
# compute and return her forms, and nothing else. The receipt proves it.
task "taxprep" {
  module    = "tool"
  principal = "alice"
  limits {
    memory  = "64MiB"
    timeout = "10s"
  }
}
