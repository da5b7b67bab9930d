# The benefits desk in C (guest-c), run for alice: the same manifest as
# alice.hcl with the C module; the cap grants "the principal's own
# benefits record", so the same tool reads alice's record and nobody else's.
task "benefits-alice" {
  module    = "guest-c"
  principal = "alice"

  seed "benefits" {
    file = "data/benefits.json"
  }

  cap "data" "benefits" {
    collection = "benefits"
    records    = "own"
    fields     = ["plan", "dental", "vision", "deductible_left"]
    ops        = ["read", "query"]
  }
}
