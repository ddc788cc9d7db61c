#define HAND_BONUS 0
