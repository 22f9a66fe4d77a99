"""Publishing: the PR proposal (`proposal`), GitHub's REST API (`github`), `post` and the job
summary (`ci`)."""
