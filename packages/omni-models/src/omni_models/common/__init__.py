"""Building blocks shared by every model pipeline, written once.

Import the submodules directly (``from omni_models.common.transformer import Decoder``); this
package file imports nothing so that light consumers never pay for torch.
"""
