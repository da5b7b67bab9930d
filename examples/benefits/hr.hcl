# The benefits desk, run for Carol, an HR manager: the cap grants "benefits
# of the people the principal manages, audited". Carol's task sees Alice's
# and Dave's records (her reports), not Bob's, not her own, and every read is
# recorded before it happens.
task "benefits-hr" {
  module    = "guest"
  principal = "carol"

  seed "benefits" {
    file = "data/benefits.json"
  }
  seed "people" {
    file      = "data/people.json"
    relations = { manager = "manager_of" }
  }

  cap "data" "benefits" {
    collection = "benefits"
    records    = { relation = "manager_of" }
    fields     = ["plan", "dental", "vision", "deductible_left"]
    ops        = ["read", "query"]
    audit      = true
  }
}
