"""SageMaker's data-parallel library, ztrain's stand-in: torch.torch_smddp."""
