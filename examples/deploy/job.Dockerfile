# The image the Kubernetes Job runs: batchor (built from the repository's Dockerfile) plus your
# job folder (specs/, data/, schemas/ and the compiled plan in plans/).
#   docker build -t batchor:0.2.0 ../..                      # from this folder
#   batchor plan job/specs/job.yaml --out job/plans/job.plan  # compile once, review it
#   docker build -f job.Dockerfile -t your-registry/batchor-job:0.2.0 . && docker push your-registry/batchor-job:0.2.0
FROM batchor:0.2.0
COPY --chown=10001:10001 job/ /job/
