"""SageMaker's distributed training libraries, as ztrain stands in for them:
smdistributed.dataparallel.torch.torch_smddp (see there)."""
