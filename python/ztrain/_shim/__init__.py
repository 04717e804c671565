"""Not for import. This folder is what ztrain puts first on PYTHONPATH for
the hosts of a SageMaker job that asks for smdistributed's data
parallelism (the hyperparameter sagemaker_distributed_dataparallel_enabled),
so that their script's `import smdistributed.dataparallel.torch.torch_smddp`
finds ztrain's stand-in here. No other program sees a package named
smdistributed from ztrain: AWS's own stays theirs."""
